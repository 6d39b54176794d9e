use super::*;

/// Words as tokens, except that decoding glues every 4th id to the word
/// before it with no space: the text then counts fewer tokens than its
/// ids, as a BPE tokenizer's merges at a cut do, and the build must add
/// ids until the count is exact.
#[derive(Default)]
struct GluingCodec(WordCodec);

impl TokenCodec for GluingCodec {
    fn describe(&self) -> String {
        "gluing words".into()
    }
    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>> {
        self.0.encode(text)
    }
    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String> {
        Box::pin(async move {
            let mut text = String::new();
            for (i, id) in tokens.iter().enumerate() {
                let word = self.0.decode(std::slice::from_ref(id)).await?;
                if i > 0 && i % 4 != 3 {
                    text.push(' ');
                }
                text.push_str(&word);
            }
            Ok(text)
        })
    }
}

/// A tokenizer that always counts one token more than any text has.
#[derive(Default)]
struct OneTooMany(WordCodec);

impl TokenCodec for OneTooMany {
    fn describe(&self) -> String {
        "one too many".into()
    }
    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>> {
        Box::pin(async move {
            let mut ids = self.0.encode(text).await?;
            ids.push(0);
            Ok(ids)
        })
    }
    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String> {
        self.0.decode(tokens)
    }
}

fn block_on<T>(f: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn every_prompt_counts_exactly_its_drawn_length() {
    let spec = SyntheticPrompts::new(200, TokenLength::normal(60, 20.0))
        .with_output(TokenLength::normal(30, 5.0))
        .with_seed(7);
    let codec = WordCodec::default();
    let built = block_on(spec.build(&codec)).unwrap();
    assert_eq!(built.dataset.conversations.len(), 200);
    for (c, &n) in built.dataset.conversations.iter().zip(&built.input_tokens) {
        assert_eq!(c.turns.len(), 1);
        assert_eq!(
            c.turns[0].split_whitespace().count(),
            n as usize,
            "{}",
            c.id
        );
        assert!(n >= 1 && c.max_output_tokens.is_some_and(|m| m >= 1));
    }
    // The draws are normal(60, 20): mean and spread near them.
    let lengths: Vec<f64> = built.input_tokens.iter().map(|&n| f64::from(n)).collect();
    let mean = lengths.iter().sum::<f64>() / 200.0;
    let sd = (lengths.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 199.0).sqrt();
    assert!((mean - 60.0).abs() < 4.0, "mean {mean}");
    assert!((sd - 20.0).abs() < 4.0, "sd {sd}");
    // The same seed builds the same prompts; another seed others.
    let again = block_on(spec.build(&WordCodec::default())).unwrap();
    assert_eq!(again.dataset, built.dataset);
    let other = block_on(spec.clone().with_seed(8).build(&codec)).unwrap();
    assert_ne!(other.dataset, built.dataset);
    assert_eq!(built.tokenizer, "whitespace-separated words");
}

#[test]
fn conversations_have_their_drawn_turns_each_with_its_own_lengths() {
    let turns = TurnCount {
        mean: 4,
        stddev: 1.5,
    };
    let spec = SyntheticPrompts::new(300, TokenLength::normal(20, 6.0))
        .with_output(TokenLength::normal(9, 3.0))
        .with_turns(turns)
        .with_seed(11);
    let codec = WordCodec::default();
    let built = block_on(spec.build(&codec)).unwrap();
    let convs = &built.dataset.conversations;
    assert_eq!(convs.len(), 300);
    // One length per prompt, every turn of every entry in order.
    let prompts: Vec<&String> = convs.iter().flat_map(|c| &c.turns).collect();
    assert_eq!(prompts.len(), built.input_tokens.len());
    for (p, &n) in prompts.iter().zip(&built.input_tokens) {
        assert_eq!(p.split_whitespace().count(), n as usize);
    }
    // Turn counts normal(4, 1.5), at least 1.
    let counts: Vec<f64> = convs.iter().map(|c| c.turns.len() as f64).collect();
    assert!(counts.iter().all(|&n| n >= 1.0));
    let mean = counts.iter().sum::<f64>() / 300.0;
    let sd = (counts.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 299.0).sqrt();
    assert!((mean - 4.0).abs() < 0.3, "mean {mean}");
    assert!((sd - 1.5).abs() < 0.3, "sd {sd}");
    // Each turn asks for its own output length; the row's is the first.
    let mut differ = 0;
    for c in convs {
        if c.turns.len() > 1 {
            assert_eq!(c.turn_output_tokens.len(), c.turns.len(), "{}", c.id);
            assert_eq!(c.max_output_tokens, c.turn_output_tokens.first().copied());
            differ += usize::from(
                c.turn_output_tokens
                    .iter()
                    .any(|&o| o != c.turn_output_tokens[0]),
            );
        } else {
            assert!(c.turn_output_tokens.is_empty());
        }
        for t in 0..c.turns.len() {
            assert!(c.output_tokens_of_turn(t).is_some_and(|o| o >= 1));
        }
    }
    assert!(
        differ > 100,
        "{differ} conversations with differing outputs"
    );
}

#[test]
fn one_turn_per_conversation_is_the_single_turn_build() {
    // Draw for draw: a fixed count of 1 draws nothing.
    let codec = WordCodec::default();
    let single = SyntheticPrompts::new(30, TokenLength::normal(20, 6.0))
        .with_output(TokenLength::normal(9, 3.0))
        .with_seed(11);
    let explicit = single.clone().with_turns(TurnCount::SINGLE);
    assert_eq!(
        block_on(single.build(&codec)).unwrap(),
        block_on(explicit.build(&codec)).unwrap()
    );
    // Three turns always: three prompts per entry.
    let three = single.clone().with_turns(TurnCount {
        mean: 3,
        stddev: 0.0,
    });
    let built = block_on(three.build(&codec)).unwrap();
    assert!(
        built
            .dataset
            .conversations
            .iter()
            .all(|c| c.turns.len() == 3)
    );
    assert_eq!(built.input_tokens.len(), 90);
    let bad = single.with_turns(TurnCount {
        mean: 0,
        stddev: 0.0,
    });
    let err = bad.validate().unwrap_err().to_string();
    assert!(err.contains("--conversation-turn-mean"), "{err}");
}

#[test]
fn a_fixed_length_longer_than_the_corpus_wraps_around_it() {
    let codec = WordCodec::default();
    let corpus_words = CORPUS.split_whitespace().count() as u32;
    let spec = SyntheticPrompts::new(2, TokenLength::fixed(corpus_words * 2 + 5));
    let built = block_on(spec.build(&codec)).unwrap();
    for c in &built.dataset.conversations {
        assert_eq!(
            c.turns[0].split_whitespace().count(),
            (corpus_words * 2 + 5) as usize
        );
        assert_eq!(c.max_output_tokens, None);
    }
}

#[test]
fn merges_at_the_cut_are_made_up_by_more_tokens() {
    let codec = GluingCodec::default();
    let spec = SyntheticPrompts::new(20, TokenLength::normal(40, 10.0)).with_seed(3);
    let built = block_on(spec.build(&codec)).unwrap();
    for (c, &n) in built.dataset.conversations.iter().zip(&built.input_tokens) {
        let counted = block_on(codec.encode(&c.turns[0])).unwrap().len();
        assert_eq!(counted, n as usize, "{}", c.id);
    }
}

#[test]
fn a_length_the_tokenizer_cannot_reach_is_an_error_naming_the_entry() {
    let spec = SyntheticPrompts::new(3, TokenLength::fixed(1));
    let err = block_on(spec.build(&OneTooMany::default()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("entry 0"), "{err}");
    assert!(err.contains("exactly 1 tokens"), "{err}");
    assert!(err.contains("one too many"), "{err}");
}

#[test]
fn bad_lengths_are_refused_before_the_tokenizer_is_asked() {
    let zero = SyntheticPrompts::new(3, TokenLength::fixed(0)).validate();
    assert!(zero.unwrap_err().to_string().contains("--isl"));
    let spread = SyntheticPrompts::new(3, TokenLength::fixed(5))
        .with_output(TokenLength::normal(5, f64::NAN))
        .validate();
    assert!(spread.unwrap_err().to_string().contains("--osl"));
    let none = SyntheticPrompts::new(0, TokenLength::fixed(5)).validate();
    assert!(none.unwrap_err().to_string().contains("at least one"));
}

fn trace(rows: &[(u32, &[u64])]) -> Dataset {
    Dataset {
        name: "trace".into(),
        conversations: rows
            .iter()
            .enumerate()
            .map(|(i, (tokens, ids))| Conversation {
                id: format!("r{i}"),
                prompt_to_build: Some(PromptToBuild {
                    tokens: *tokens,
                    hash_ids: ids.to_vec(),
                }),
                ..Conversation::default()
            })
            .chain([Conversation {
                id: "text".into(),
                turns: vec!["given as text".into()],
                ..Conversation::default()
            }])
            .collect(),
    }
}

#[test]
fn trace_prompts_share_their_blocks_and_count_their_length() {
    let codec = WordCodec::default();
    let mut rows = trace(&[(30, &[7, 8]), (25, &[7, 9]), (12, &[]), (5, &[7, 8, 9])]);
    let built = block_on(TracePrompts::new(10).with_seed(3).build(&mut rows, &codec)).unwrap();
    assert_eq!(built, 4);
    let words: Vec<Vec<&str>> = (rows.conversations.iter())
        .map(|c| c.turns[0].split(' ').collect())
        .collect();
    let lengths: Vec<usize> = words.iter().map(Vec::len).collect();
    assert_eq!(lengths, [30, 25, 12, 5, 3]);
    assert_eq!(words[0][..10], words[1][..10], "block 7");
    assert_ne!(words[0][10..20], words[1][10..20], "blocks 8 and 9");
    assert_eq!(
        words[3][..],
        words[0][..5],
        "a prompt shorter than its first block"
    );
    assert_eq!(rows.conversations[4].turns, ["given as text"]);
    // Merges at the cut are made up for; the shared prefix stays.
    let gluing = GluingCodec::default();
    let mut rows = trace(&[(30, &[7, 8]), (25, &[7, 9])]);
    block_on(TracePrompts::new(10).build(&mut rows, &gluing)).unwrap();
    for (c, want) in rows.conversations.iter().zip([30, 25]) {
        assert_eq!(block_on(gluing.encode(&c.turns[0])).unwrap().len(), want);
    }
    // A row that cannot be built is named.
    let mut rows = trace(&[(1, &[1])]);
    let err = block_on(TracePrompts::new(10).build(&mut rows, &OneTooMany::default()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("row r0 (1 tokens)"), "{err}");
}

/// Words, but each call yields before it answers, counting how many calls
/// are in flight at once.
#[derive(Default)]
struct SlowCodec {
    words: WordCodec,
    in_flight: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl SlowCodec {
    async fn call<T>(&self, f: impl Future<Output = T>) -> T {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        let out = f.await;
        self.in_flight.fetch_sub(1, SeqCst);
        out
    }
}

impl TokenCodec for SlowCodec {
    fn describe(&self) -> String {
        "slow words".into()
    }
    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>> {
        Box::pin(self.call(self.words.encode(text)))
    }
    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String> {
        Box::pin(self.call(self.words.decode(tokens)))
    }
}

#[test]
fn prompts_are_cut_several_at_once_and_come_out_the_same() {
    let spec = SyntheticPrompts::new(40, TokenLength::normal(30, 10.0))
        .with_output(TokenLength::fixed(5))
        .with_turns(TurnCount {
            mean: 2,
            stddev: 1.0,
        })
        .with_seed(4);
    let slow = SlowCodec::default();
    let built = block_on(spec.build(&slow)).unwrap();
    let most = slow.most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most > 4, "{most} tokenizer calls in flight at most");
    // The same prompts, in the same order, as a tokenizer answering at once.
    let direct = block_on(spec.build(&WordCodec::default())).unwrap();
    assert_eq!(built.dataset, direct.dataset);
    assert_eq!(built.input_tokens, direct.input_tokens);
}

#[test]
fn first_prompts_open_with_one_of_the_pools_prefixes() {
    let turns = TurnCount {
        mean: 3,
        stddev: 0.0,
    };
    let base = SyntheticPrompts::new(40, TokenLength::normal(12, 3.0))
        .with_turns(turns)
        .with_seed(5);
    let pool = PrefixPool {
        prompts: 3,
        length: 9,
    };
    let codec = WordCodec::default();
    let built = block_on(base.clone().with_prefix(pool).build(&codec)).unwrap();
    let plain = block_on(base.build(&codec)).unwrap();
    let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let mut prefixes = std::collections::BTreeSet::new();
    let prompts = built
        .dataset
        .conversations
        .iter()
        .zip(&plain.dataset.conversations);
    let mut lengths = built.input_tokens.iter();
    for (with, without) in prompts {
        // The first prompt: 9 prefix words, then the same body as without
        // a pool (the prefixes draw from their own sequence).
        let first = words(&with.turns[0]);
        assert_eq!(
            first.len(),
            9 + words(&without.turns[0]).len(),
            "{}",
            with.id
        );
        assert_eq!(first[9..], words(&without.turns[0])[..], "{}", with.id);
        assert_eq!(*lengths.next().unwrap() as usize, first.len());
        prefixes.insert(first[..9].join(" "));
        // Later turns carry no prefix.
        for (t, p) in with.turns.iter().zip(&without.turns).skip(1) {
            assert_eq!(t, p);
            assert_eq!(*lengths.next().unwrap() as usize, words(t).len());
        }
    }
    assert_eq!(
        prefixes.len(),
        3,
        "every prefix of the pool used: {prefixes:?}"
    );
    // An empty pool, or prefixes of no tokens, are refused.
    for bad in [(0, 9), (3, 0)] {
        let pool = PrefixPool {
            prompts: bad.0,
            length: bad.1,
        };
        let spec = SyntheticPrompts::new(1, TokenLength::fixed(3)).with_prefix(pool);
        let err = spec.validate().unwrap_err().to_string();
        assert!(err.contains("--num-prefix-prompts"), "{err}");
    }
}
