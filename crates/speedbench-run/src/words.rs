//! The spec's enums serialize as the words their flags take (`chat`,
//! `poisson`, `3/8`), so a spec written to JSON or TOML reads like the
//! command line that made it.

use std::fmt::Display;
use std::str::FromStr;

use speedbench_client::{
    ApiKind, Arrival, ConnectionReuse, ExportLevel, HttpClientKind, RampShape, Shard,
};
use speedbench_dataset::Resolver;

/// A value with one word for it, the one its flag takes.
pub(crate) trait Word: FromStr<Err: Display> {
    /// The word.
    fn word(&self) -> String;
}

impl Word for ApiKind {
    fn word(&self) -> String {
        self.name().into()
    }
}

impl Word for HttpClientKind {
    fn word(&self) -> String {
        self.name().into()
    }
}

impl Word for ConnectionReuse {
    fn word(&self) -> String {
        self.name().into()
    }
}

impl Word for Arrival {
    fn word(&self) -> String {
        self.name().into()
    }
}

impl Word for RampShape {
    fn word(&self) -> String {
        self.name().into()
    }
}

impl Word for ExportLevel {
    fn word(&self) -> String {
        self.as_str().into()
    }
}

impl Word for Resolver {
    fn word(&self) -> String {
        self.to_string()
    }
}

impl Word for Shard {
    fn word(&self) -> String {
        self.to_string()
    }
}

/// `#[serde(with = "by_name")]`: a [`Word`] as its word.
pub(crate) mod by_name {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use super::Word;

    pub(crate) fn serialize<T: Word, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&value.word())
    }

    pub(crate) fn deserialize<'de, T: Word, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(D::Error::custom)
    }

    /// The same for an optional value.
    pub(crate) mod option {
        use serde::{Deserialize, Deserializer, Serializer, de::Error};

        use super::super::Word;

        pub(crate) fn serialize<T: Word, S: Serializer>(
            value: &Option<T>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match value {
                Some(v) => s.serialize_some(&v.word()),
                None => s.serialize_none(),
            }
        }

        pub(crate) fn deserialize<'de, T: Word, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<T>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|text| text.parse().map_err(D::Error::custom))
                .transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::RunSpec;

    #[test]
    fn a_spec_round_trips_through_json_in_its_flags_words() {
        let mut spec = RunSpec::default();
        spec.shard.shard = Some("1/4".parse().unwrap());
        spec.load.arrival = "constant".parse().unwrap();
        spec.target.engine = "sglang".parse().unwrap();
        let json = serde_json::to_value(&spec).unwrap();
        assert_eq!(json["shard"]["shard"], "1/4");
        assert_eq!(json["load"]["arrival"], "constant");
        assert_eq!(json["target"]["engine"], "sglang");
        assert_eq!(json["target"]["endpoint_type"], "chat");
        let back: RunSpec = serde_json::from_value(json).unwrap();
        assert_eq!(back, spec);
    }

    #[test]
    fn secrets_are_never_serialized_nor_printed() {
        let mut spec = RunSpec::default();
        spec.target.api_key = Some(crate::Secret::new("sk-live-123"));
        spec.target.headers = vec![crate::Secret::new("X-Key:abc-secret")];
        let json = serde_json::to_string(&spec).unwrap();
        let debug = format!("{spec:?}");
        for text in [&json, &debug] {
            assert!(
                !text.contains("sk-live-123") && !text.contains("abc-secret"),
                "{text}"
            );
        }
    }
}
