//! Settings typed in as decimals (a temperature of 0.7) and held as `f32` are written back as they
//! were typed: the journal goes through `serde_json::Value`, whose numbers are `f64`, and 0.7f32
//! widened to `f64` would read `0.699999988079071`.

use serde::Serializer;

/// `x` as the `f64` of its shortest `f32` decimal (0.7f32 → 0.7).
pub fn widened(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// `serialize_with` for an `f32` field.
pub fn short<S: Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(widened(*x))
}

/// `serialize_with` for an `Option<f32>` field.
pub fn short_opt<S: Serializer>(x: &Option<f32>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => s.serialize_some(&widened(*x)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_decimal_reads_back_as_typed_and_as_the_same_f32() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct T {
            #[serde(serialize_with = "short")]
            a: f32,
            #[serde(serialize_with = "short_opt")]
            b: Option<f32>,
        }
        let value = serde_json::to_value(T { a: 0.7, b: Some(1.1) }).unwrap();
        assert_eq!(value.to_string(), r#"{"a":0.7,"b":1.1}"#);
        let back: T = serde_json::from_value(value).unwrap();
        assert_eq!((back.a, back.b), (0.7, Some(1.1)));
        // What older journals wrote reads as the same f32.
        let old: T = serde_json::from_str(r#"{"a":0.699999988079071,"b":null}"#).unwrap();
        assert_eq!((old.a, old.b), (0.7, None));
        assert_eq!(widened(f32::MAX) as f32, f32::MAX);
    }
}
