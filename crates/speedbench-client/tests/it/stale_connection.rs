//! A server that closes keep-alive connections: a request is sent once.
//! A pooled connection found closed before the request is written is
//! replaced (nothing was sent); one closed after the server read the
//! request fails that request, which is never sent again.

use crate::common;

use common::*;
use speedbench_client::{HttpClientKind, Load};
use speedbench_record::{ErrorKind, RequestRecord};

fn script() -> Vec<Piece> {
    vec![
        data(0, r#"{"choices":[{"delta":{"content":"hi"}}]}"#),
        data(
            0,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        ),
        raw(0, "data: [DONE]\n\n"),
    ]
}

/// Four single-turn requests, one at a time, through `client` to a server
/// whose connections answer once and then end as `closing` says.
async fn four_requests(client: HttpClientKind, closing: Closing) -> Vec<RequestRecord> {
    let addr = scripted_sse_with(script(), 1, closing).await;
    let dir = tempfile::tempdir().unwrap();
    let records = profile(
        dir.path(),
        single_turns(4),
        target(&format!("http://{addr}")).with_http_client(client),
        Load::default(),
    )
    .await;
    assert_eq!(records.len(), 4);
    records
}

#[tokio::test]
async fn connections_closed_after_their_answer_are_replaced_before_the_next_request() {
    for client in [HttpClientKind::Lean, HttpClientKind::Hyper] {
        // Every request after the first finds its pooled connection closed.
        let records = four_requests(client, Closing::AfterAnswer).await;
        for r in &records {
            assert!(r.is_success(), "{client:?}: {:?}", r.error_message);
            assert_eq!(r.output_text, "hi");
        }
    }
}

#[tokio::test]
async fn a_request_read_and_never_answered_fails_and_is_not_sent_again() {
    for client in [HttpClientKind::Lean, HttpClientKind::Hyper] {
        // Each connection answers one request, then reads the next and
        // closes without a word.
        let records = four_requests(client, Closing::AfterReading).await;
        // Requests alternate: a fresh connection answers, its reuse fails.
        let failed: Vec<&str> = records
            .iter()
            .filter(|r| !r.is_success())
            .map(|r| r.error_message.as_deref().unwrap())
            .collect();
        assert_eq!(failed.len(), 2, "{client:?}: {failed:?}");
        for (r, message) in records.iter().filter(|r| !r.is_success()).zip(&failed) {
            assert_eq!(r.error_kind, Some(ErrorKind::Connection));
            assert!(message.contains("not sent again"), "{client:?}: {message}");
        }
    }
}
