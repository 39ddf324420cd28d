# TechEmpower's Accept headers, as its wrk runs send them (the lab's bench
# sends the same, crates/peregrine-lab/src/bench/load.rs, whose test
# shell_accept_headers_match_the_bench holds the two equal). Sourced by the
# scripts that load a server the way TFB does, so that they cannot drift
# apart: the long Accept header is a large part of a request's parse.
# shellcheck shell=bash
# shellcheck disable=SC2034
tfb_plaintext_accept="text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
tfb_json_accept="application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
