//! The reader against canned bytes: every framing, every split of the
//! input across reads, and the ways a response can be broken.

use super::*;
use std::io::{self, ErrorKind, Read};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source that hands out its bytes in the given pieces, one per read,
/// then reports `end`.
struct Pieces {
    pieces: Vec<Vec<u8>>,
    end: Option<ErrorKind>,
}

impl Pieces {
    fn split(bytes: &[u8], at: &[usize]) -> Pieces {
        let mut pieces = Vec::new();
        let mut from = 0;
        for &cut in at {
            pieces.push(bytes[from..cut].to_vec());
            from = cut;
        }
        pieces.push(bytes[from..].to_vec());
        Pieces { pieces: pieces.into_iter().filter(|p| !p.is_empty()).rev().collect(), end: None }
    }
}

impl Read for Pieces {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        match self.pieces.pop() {
            Some(mut piece) => {
                let n = piece.len().min(out.len());
                out[..n].copy_from_slice(&piece[..n]);
                if n < piece.len() {
                    self.pieces.push(piece.split_off(n));
                }
                Ok(n)
            }
            None => match self.end {
                Some(kind) => Err(io::Error::new(kind, "test end")),
                None => Ok(0),
            },
        }
    }
}

/// Every response in `bytes`, read one after the other until the stream
/// ends, as (status, body, defects, framing).
fn read_all(src: &mut dyn Read, head_request: bool) -> Vec<(u16, Vec<u8>, Vec<String>, Framing)> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    loop {
        match read_response(src, &mut buf, head_request) {
            Ok(r) => out.push((r.status, r.body, r.defects, r.framing)),
            Err(ReadError::Ended { end: End::Closed, received: 0 }) => return out,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

const CONTENT_LENGTH: &[u8] = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 13\r\n\r\nHello, World!";
const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nHello\r\n8;a;b=\"c\"\r\n, World!\r\n0\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\n";
const INTERIM: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";

#[test]
fn parses_content_length_response() {
    let r = Response::parse(CONTENT_LENGTH).expect("parse");
    assert_eq!((r.status, r.reason.as_str(), r.version.as_str()), (200, "OK", "HTTP/1.1"));
    assert_eq!(r.header("SERVER"), Some("x"));
    assert_eq!(r.content_length(), Some(13));
    assert_eq!(r.body, b"Hello, World!");
    assert_eq!(r.framing, Framing::ContentLength(13));
    assert!(r.defects.is_empty() && r.cut_short.is_none(), "{:?}", r.defects);
    assert_eq!(r.raw_head, &CONTENT_LENGTH[..CONTENT_LENGTH.len() - 13]);
}

#[test]
fn parses_chunked_with_extensions_and_trailers() {
    let r = Response::parse(CHUNKED).expect("parse");
    assert_eq!(r.body, b"Hello, World!");
    assert_eq!(r.framing, Framing::Chunked);
    assert!(r.defects.is_empty(), "{:?}", r.defects);
}

#[test]
fn every_split_of_the_input_reads_the_same() {
    // Pipelined: all three framings, an interim response, and a HEAD-less
    // 204 and 304 in one stream.
    let stream: Vec<u8> = [
        CONTENT_LENGTH,
        CHUNKED,
        INTERIM,
        b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
    ]
    .concat();
    let whole = read_all(&mut Pieces::split(&stream, &[]), false);
    let statuses: Vec<u16> = whole.iter().map(|r| r.0).collect();
    assert_eq!(statuses, [200, 200, 100, 201, 204, 304]);
    assert!(whole.iter().all(|r| r.2.is_empty()), "{whole:?}");
    for cut in 1..stream.len() {
        assert_eq!(read_all(&mut Pieces::split(&stream, &[cut]), false), whole, "split at {cut}");
    }
    let bytewise: Vec<usize> = (1..stream.len()).collect();
    assert_eq!(read_all(&mut Pieces::split(&stream, &bytewise), false), whole, "one byte per read");
}

#[test]
fn interim_responses_are_returned_and_parse_skips_them() {
    let mut src = INTERIM;
    let mut buf = Vec::new();
    let first = read_response(&mut src, &mut buf, false).expect("interim");
    assert_eq!(first.status, 100);
    assert!(first.is_interim() && first.body.is_empty() && first.framing == Framing::None);
    let second = read_response(&mut src, &mut buf, false).expect("final");
    assert_eq!((second.status, second.body.as_slice()), (201, &b"ok"[..]));
    let parsed = Response::parse(INTERIM).expect("parse");
    assert_eq!(parsed.status, 201);
    // 101 ends HTTP on the connection: it is final, not interim.
    assert_eq!(Response::parse(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").expect("101").status, 101);
}

#[test]
fn head_response_has_no_body_despite_content_length() {
    let stream = [&CONTENT_LENGTH[..CONTENT_LENGTH.len() - 13], CONTENT_LENGTH].concat();
    let mut src = stream.as_slice();
    let mut buf = Vec::new();
    let head = read_response(&mut src, &mut buf, true).expect("head");
    assert_eq!((head.status, head.body.len(), head.framing), (200, 0, Framing::None));
    assert_eq!(head.content_length(), Some(13));
    assert!(head.defects.is_empty());
    // The next response on the connection is intact.
    let next = read_response(&mut src, &mut buf, false).expect("next");
    assert_eq!(next.body, b"Hello, World!");
}

#[test]
fn close_delimited_body_runs_to_the_end_of_the_stream() {
    let r = Response::parse(b"HTTP/1.0 200 OK\r\n\r\nabc\r\n\r\ndef").expect("parse");
    assert_eq!(r.framing, Framing::UntilClose);
    assert_eq!(r.body, b"abc\r\n\r\ndef");
    assert_eq!(r.defects, ["no Content-Length and not chunked"]);
    assert!(r.cut_short.is_none());
    // A server that neither frames nor closes: the read times out.
    let mut src = Pieces::split(b"HTTP/1.1 200 OK\r\n\r\nabc", &[]);
    src.end = Some(ErrorKind::WouldBlock);
    let r = read_response(&mut src, &mut Vec::new(), false).expect("head");
    assert_eq!(r.body, b"abc");
    assert!(r.defects.iter().any(|d| d.contains("stayed open")), "{:?}", r.defects);
    assert!(r.cut_short.as_ref().is_some_and(End::timed_out));
}

#[test]
fn records_framing_defects() {
    let short = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nHello").expect("parse");
    assert!(short.defects.iter().any(|d| d.contains("shorter than Content-Length")), "{:?}", short.defects);
    assert_eq!(short.cut_short, Some(End::Closed));
    let long = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nHello").expect("parse");
    assert!(long.defects.iter().any(|d| d.contains("unexpected bytes after")));
    let bare = Response::parse(b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n").expect("parse");
    assert!(bare.defects.iter().any(|d| d.contains("bare LF")));
    let both = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
        .expect("parse");
    assert!(both.defects.iter().any(|d| d.contains("conflicting")));
    let twice = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na")
        .expect("parse");
    assert!(twice.defects.iter().any(|d| d.contains("sent 2 times")));
    let te_and_cl = Response::parse(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    )
    .expect("parse");
    assert!(te_and_cl.defects.iter().any(|d| d.contains("both")));
    let name =
        Response::parse(b"HTTP/1.1 200 OK\r\nBad Name: 1\r\nContent-Length: 0\r\n\r\n").expect("parse");
    assert!(name.defects.iter().any(|d| d.contains("malformed header name")));
}

#[test]
fn broken_chunked_bodies_are_defects() {
    let cases: [(&[u8], &str); 4] = [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHelloXX0\r\n\r\n",
            "not followed by CRLF",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHel", "cut short"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n", "before the last chunk"),
    ];
    for (bytes, want) in cases {
        let r = Response::parse(bytes).expect("head parses");
        assert!(r.defects.iter().any(|d| d.contains(want)), "{want}: {:?}", r.defects);
    }
}

#[test]
fn malformed_or_missing_heads_are_errors() {
    for garbage in [
        &b"garbage\r\n\r\n"[..],
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/2 200 OK\r\n\r\n",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 099 Low\r\n\r\n",
    ] {
        assert!(matches!(Response::parse(garbage), Err(ReadError::Malformed(_))), "{garbage:?}");
    }
    assert!(matches!(Response::parse(b""), Err(ReadError::Ended { end: End::Closed, received: 0 })));
    let cut = Response::parse(b"HTTP/1.1 200 OK\r\nContent-");
    assert!(matches!(cut, Err(ReadError::Ended { end: End::Closed, received: 25 })), "{cut:?}");
    let huge = [&b"HTTP/1.1 200 OK\r\nX: "[..], &vec![b'a'; MAX_HEAD + 1]].concat();
    assert!(matches!(Response::parse(&huge), Err(ReadError::Malformed(_))));
    // A reset before any byte keeps its kind, for callers that match on it.
    let mut src = Pieces { pieces: Vec::new(), end: Some(ErrorKind::ConnectionReset) };
    match read_response(&mut src, &mut Vec::new(), false) {
        Err(ReadError::Ended { end, received: 0 }) => {
            assert_eq!(end.to_io_error().kind(), ErrorKind::ConnectionReset)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_read_as_sentences() {
    let closed = ReadError::Ended { end: End::Closed, received: 0 };
    assert_eq!(closed.to_string(), "connection closed without a response");
    let timeout = End::Failed { kind: ErrorKind::WouldBlock, message: "x".into() };
    let quiet = ReadError::Ended { end: timeout, received: 0 };
    assert_eq!(quiet.to_string(), "timed out while reading the response head");
}

fn head_of(bytes: &[u8]) -> Head {
    parse::parse_head(bytes).expect("valid").expect("complete")
}

#[test]
fn strict_checks_accept_a_good_response() {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64;
    let text = format!(
        "HTTP/1.1 200 OK\r\nServer: p\r\nDate: {}\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n",
        date::format_imf_fixdate(secs)
    );
    let head = head_of(text.as_bytes());
    assert_eq!(strict::head_problems(&head), Vec::<String>::new());
    assert_eq!(strict::final_problems(&head, now), Vec::<String>::new());
    assert_eq!(strict::interim_problems(&head_of(b"HTTP/1.1 100 Continue\r\n\r\n")), Vec::<String>::new());
    assert_eq!(strict::leftover_problem(b""), None);
    assert_eq!(strict::leftover_problem(b"HTTP/1."), None);
    assert_eq!(strict::leftover_problem(b"HTTP/1.1 200 OK\r\n"), None);
}

#[test]
fn strict_checks_name_each_problem() {
    let now = SystemTime::now();
    let bad = head_of(b"HTTP/1.0 200\r\nX  : 1\r\nY:2\r\nZ:  3 \r\n\r\n");
    let problems = strict::head_problems(&bad).join("\n");
    for want in ["not HTTP/1.1", "no reason phrase", "bad header name", "bad header line", "stray whitespace"]
    {
        assert!(problems.contains(want), "{want} in {problems}");
    }
    let old = now - Duration::from_secs(60);
    let old_secs = old.duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64;
    let text = format!(
        "HTTP/1.1 200 OK\r\nDate: {}\r\nContent-Length: x\r\nContent-Type: a\r\nContent-Type: b\r\nTransfer-Encoding: chunked\r\n\r\n",
        date::format_imf_fixdate(old_secs)
    );
    let problems = strict::final_problems(&head_of(text.as_bytes()), now).join("\n");
    for want in [
        "no Server",
        "Content-Type appears 2 times",
        "Transfer-Encoding",
        "away from now",
        "bad Content-Length",
    ] {
        assert!(problems.contains(want), "{want} in {problems}");
    }
    assert!(
        strict::date_problem("Mon, 06 Nov 1994 08:49:37 GMT", now).is_some_and(|p| p.contains("bad Date"))
    );
    assert!(!strict::interim_problems(&head_of(b"HTTP/1.1 100 Continue\r\nX: 1\r\n\r\n")).is_empty());
    assert!(strict::leftover_problem(b"ab HTTP/1.1").is_some());
}

#[cfg(feature = "tokio")]
mod async_reader {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::io::{AsyncRead, ReadBuf};

    struct AsyncPieces(Pieces);

    impl AsyncRead for AsyncPieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            out: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let mut tmp = vec![0; out.remaining()];
            let n = self.0.read(&mut tmp)?;
            out.put_slice(&tmp[..n]);
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn async_reader_matches_the_blocking_one_at_every_split() {
        let stream = [CONTENT_LENGTH, CHUNKED, INTERIM].concat();
        let whole = read_all(&mut Pieces::split(&stream, &[]), false);
        for cut in 0..stream.len() {
            let mut src = AsyncPieces(Pieces::split(&stream, &[cut]));
            let mut buf = Vec::new();
            let mut got = Vec::new();
            loop {
                match async_io::read_response(&mut src, &mut buf, false).await {
                    Ok(r) => got.push((r.status, r.body, r.defects, r.framing)),
                    Err(ReadError::Ended { end: End::Closed, received: 0 }) => break,
                    Err(e) => panic!("split at {cut}: {e}"),
                }
            }
            assert_eq!(got, whole, "split at {cut}");
        }
        let mut cut = AsyncPieces(Pieces::split(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhi", &[]));
        let r = async_io::read_response(&mut cut, &mut Vec::new(), false).await.expect("head");
        assert_eq!((r.body.as_slice(), r.cut_short), (&b"hi"[..], Some(End::Closed)));
    }
}
