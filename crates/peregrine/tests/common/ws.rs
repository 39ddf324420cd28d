//! WebSocket helpers shared by the HTTP/1.1 (`websocket.rs`) and HTTP/2
//! (`ws_h2.rs`) tests: the echo handler they serve and the client frames
//! they send.

use peregrine::ws::{Message, WebSocketUpgrade};

/// Echoes text and binary messages in order until the socket ends.
pub fn echo(ws: WebSocketUpgrade) -> peregrine::Response {
    ws.on_upgrade(|mut socket| async move {
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, Message::Text(_) | Message::Binary(_)) && socket.send(message).await.is_err()
            {
                break;
            }
        }
    })
}

/// One client frame: first byte `b0` (FIN, RSV bits, opcode), masked with a
/// fixed key, as RFC 6455 requires of clients.
pub fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x12, 0x34, 0x56, 0x78];
    let mut f = vec![b0];
    match payload.len() {
        n @ 0..=125 => f.push(0x80 | n as u8),
        n @ 126..=0xFFFF => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(0x80 | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}
