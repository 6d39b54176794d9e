//! A server that closes keep-alive connections without saying so (llama.cpp's
//! server after a stream) must not turn requests into connection errors.

mod common;

use common::*;
use speedbench_client::LoadConfig;

#[tokio::test]
async fn requests_on_silently_closed_connections_are_sent_again() {
    let script = vec![
        data(0, r#"{"choices":[{"delta":{"content":"hi"}}]}"#),
        data(
            0,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
        ),
        raw(0, "data: [DONE]\n\n"),
    ];
    // One answer per connection: every request after the first goes out on a
    // pooled connection the server has already given up on.
    let addr = scripted_sse_with(script, 1).await;
    let dir = tempfile::tempdir().unwrap();
    let records = profile(
        dir.path(),
        single_turns(4),
        target(&format!("http://{addr}")),
        LoadConfig::default(),
    )
    .await;
    assert_eq!(records.len(), 4);
    for r in &records {
        assert!(r.is_success(), "{:?}", r.error_message);
        assert_eq!(r.output_text, "hi");
    }
}
