//! The bundled fixtures load as datasets.
use speedbench_dataset::LookupError;
use speedbench_dataset::{Dataset, DatasetError, QUALITATIVE_CATEGORIES};

fn fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/speed_bench_mini.jsonl")
}

#[test]
fn the_mini_fixture_has_every_category_and_multi_turn_rows() {
    let d = Dataset::from_jsonl_file(fixture()).unwrap();
    assert_eq!(d.name, "speed_bench_mini");
    assert_eq!(d.conversations.len(), 33);
    // 33 first turns + 11 second turns + 2 extra reasoning turns.
    assert_eq!(d.turn_count(), 46);
    let cats: Vec<_> = d.categories().into_iter().collect();
    assert_eq!(cats, QUALITATIVE_CATEGORIES.to_vec());
}

#[test]
fn a_filter_that_matches_nothing_lists_what_exists() {
    let d = Dataset::from_jsonl_file(fixture()).unwrap();
    let err = d.filter_categories(&["cooking".into()]).unwrap_err();
    assert!(matches!(
        err,
        DatasetError::Lookup(LookupError::NoRowsMatch { .. })
    ));
    let msg = err.to_string();
    assert!(
        msg.contains("\"cooking\"") && msg.contains("\"roleplay\""),
        "{msg}"
    );
    let two = d.filter_categories(&["math".into(), "qa".into()]).unwrap();
    assert_eq!(two.conversations.len(), 6);
}

#[test]
fn a_missing_file_names_the_path() {
    let err = Dataset::from_jsonl_file("/no/such/rows.jsonl").unwrap_err();
    assert!(
        err.to_string().starts_with("/no/such/rows.jsonl: "),
        "{err}"
    );
}
