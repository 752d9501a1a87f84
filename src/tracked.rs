//! A deserializer of a JSON value that names the path of the field that failed
//! (`spec.containers[0].ports[1].containerPort`). Every typed read of JSON in podinit goes
//! through it (manifests via `manifest::strict::typed`, OCI specs, image manifests, state
//! files), so that each type's deserializer is in the binary once, for this one input.
//!
//! Why not serde_path_to_error: it wraps any deserializer, so every type of a Pod was
//! deserialized through two layers of generic code (its wrappers around serde_json's value
//! deserializer); this one reads the value itself and keeps the path out of line, for a
//! smaller binary (BENCHMARKS.md has the figure). Paths are written as serde_path_to_error
//! wrote them: keys joined by `.`, indexes as `[i]`, `.` for the document itself.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, Expected, Unexpected, Visitor};
use serde_json::{Error, Value};
use std::cell::RefCell;

/// One step down from the document's root.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// The path to the value being read, and the path where the first error arose.
#[derive(Default)]
struct Track<'a> {
    path: RefCell<Vec<Step<'a>>>,
    failed: RefCell<Option<String>>,
}

impl<'a> Track<'a> {
    /// Runs `f` one step further down; the innermost error keeps its path. The work around
    /// the call is in functions of their own, so that each of the many instances of this
    /// one (one per type read) is little more than the call.
    fn at<T>(&self, step: Step<'a>, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        self.enter(step);
        let r = f();
        self.leave(r.is_err());
        r
    }

    #[inline(never)]
    fn enter(&self, step: Step<'a>) {
        self.path.borrow_mut().push(step);
    }

    #[inline(never)]
    fn leave(&self, failed: bool) {
        if failed && self.failed.borrow().is_none() {
            *self.failed.borrow_mut() = Some(self.render());
        }
        self.path.borrow_mut().pop();
    }

    fn render(&self) -> String {
        let mut s = String::new();
        for step in self.path.borrow().iter() {
            match step {
                Step::Key(k) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(k);
                }
                Step::Index(i) => s.push_str(&format!("[{i}]")),
            }
        }
        s
    }
}

/// Deserializes `doc` into `T`; an error comes with the failing value's path.
pub fn deserialize<'a, T: de::Deserialize<'a>>(doc: &'a Value) -> Result<T, (String, Error)> {
    let track = Track::default();
    T::deserialize(De {
        value: doc,
        track: &track,
    })
    .map_err(|e| {
        let path = track.failed.take().unwrap_or_default();
        (if path.is_empty() { ".".into() } else { path }, e)
    })
}

/// JSON that is not a `T`: serde's error, and the path of the field it is in (none for a
/// syntax error, which says its line and column, or for the document itself).
#[derive(Debug)]
pub struct ReadError {
    pub path: Option<String>,
    pub err: Error,
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{p}: {}", self.err),
            None => self.err.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// For the callers still written over strings.
impl From<ReadError> for String {
    fn from(e: ReadError) -> String {
        e.to_string()
    }
}

/// JSON text into `T`: a syntax error says where it is (line and column), a type error
/// which field it is in (`process.args[0]: invalid type: …`). Every typed read of JSON goes
/// through here or `from_value`, so that each type's deserializer is in the binary once.
pub fn from_slice<T: de::DeserializeOwned>(text: &[u8]) -> Result<T, ReadError> {
    let doc: Value = serde_json::from_slice(text).map_err(|err| ReadError { path: None, err })?;
    from_value(&doc)
}

/// `doc` into `T`; a type error names its field, as `from_slice`'s.
pub fn from_value<T: de::DeserializeOwned>(doc: &Value) -> Result<T, ReadError> {
    deserialize(doc).map_err(|(path, err)| ReadError {
        path: (path != ".").then_some(path),
        err,
    })
}

struct De<'a, 't> {
    value: &'a Value,
    track: &'t Track<'a>,
}

/// What a value is, for "invalid type" errors.
fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (_, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

// Each `deserialize_*` accepts the kinds of value serde_json's own value deserializer
// accepts and calls the visitor only for those (not every `visit_*` as `deserialize_any`
// does): the same errors, and much less code for each of the Pod's many types.
impl<'a> De<'a, '_> {
    fn invalid(&self, exp: &dyn Expected) -> Error {
        de::Error::invalid_type(unexpected(self.value), exp)
    }

    fn number<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (_, Some(i)) => visitor.visit_i64(i),
                _ => visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN)),
            },
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn seq<V: Visitor<'a>>(self, items: &'a [Value], visitor: V) -> Result<V::Value, Error> {
        let mut seq = Seq {
            items: items.iter(),
            index: 0,
            track: self.track,
        };
        let v = visitor.visit_seq(&mut seq)?;
        // As serde_json's own value deserializer: what the visitor left is an error.
        match seq.items.len() {
            0 => Ok(v),
            _ => Err(de::Error::invalid_length(
                items.len(),
                &"fewer elements in array",
            )),
        }
    }

    fn map<V: Visitor<'a>>(
        self,
        entries: &'a serde_json::Map<String, Value>,
        visitor: V,
    ) -> Result<V::Value, Error> {
        let mut map = Map {
            entries: entries.iter(),
            value: None,
            track: self.track,
        };
        let v = visitor.visit_map(&mut map)?;
        match map.entries.len() {
            0 => Ok(v),
            _ => Err(de::Error::invalid_length(
                entries.len(),
                &"fewer elements in map",
            )),
        }
    }
}

/// The numeric `deserialize_*`: a number of any kind goes to the visitor, which range-checks.
macro_rules! numbers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
            self.number(visitor)
        }
    )*};
}

impl<'a> Deserializer<'a> for De<'a, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(_) => self.number(visitor),
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => self.seq(items, visitor),
            Value::Object(entries) => self.map(entries, visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Bool(b) => visitor.visit_bool(*b),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::String(s) => visitor.visit_borrowed_str(s),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => self.seq(items, visitor),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => self.seq(items, visitor),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(entries) => self.map(entries, visitor),
            _ => Err(self.invalid(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(entries) => self.map(entries, visitor),
            Value::Array(items) => self.seq(items, visitor),
            _ => Err(self.invalid(&visitor)),
        }
    }

    /// Enums are serde_json's own (no Kubernetes type is one); their path ends at them.
    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.value.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    numbers! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    }
}

struct Seq<'a, 't> {
    items: std::slice::Iter<'a, Value>,
    index: usize,
    track: &'t Track<'a>,
}

impl<'a> de::SeqAccess<'a> for Seq<'a, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some(value) = self.items.next() else {
            return Ok(None);
        };
        let track = self.track;
        self.index += 1;
        track
            .at(Step::Index(self.index - 1), || {
                seed.deserialize(De { value, track })
            })
            .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'a, 't> {
    entries: serde_json::map::Iter<'a>,
    value: Option<(&'a str, &'a Value)>,
    track: &'t Track<'a>,
}

impl<'a> de::MapAccess<'a> for Map<'a, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((key, value));
        // A key refused (an unknown field of a strict type) is named by its path.
        self.track
            .at(Step::Key(key), || {
                seed.deserialize(BorrowedStrDeserializer::new(key))
            })
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let (key, value) = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("a map value asked for before its key"))?;
        let track = self.track;
        track.at(Step::Key(key), || seed.deserialize(De { value, track }))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        name: String,
        #[serde(default)]
        items: Vec<Item>,
        labels: Option<BTreeMap<String, String>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Item {
        port: u16,
        tag: Option<String>,
    }

    fn err(json: Value) -> (String, String) {
        let (path, e) = deserialize::<Doc>(&json).unwrap_err();
        (path, e.to_string())
    }

    #[test]
    fn reads_what_serde_json_reads() {
        let v = serde_json::json!({"name": "a", "items": [{"port": 80}, {"port": 1, "tag": "x"}],
            "labels": {"k": "v"}});
        let via: Doc = deserialize(&v).unwrap();
        assert_eq!(via, serde_json::from_value::<Doc>(v).unwrap());
        assert_eq!(via.items[1].tag.as_deref(), Some("x"));
    }

    #[test]
    fn errors_name_the_innermost_path() {
        assert_eq!(
            err(serde_json::json!({"name": "a", "items": [{"port": 80}, {"port": "x"}]})),
            (
                "items[1].port".into(),
                "invalid type: string \"x\", expected u16".into()
            )
        );
        assert_eq!(
            err(serde_json::json!({"name": "a", "items": [{"port": 70000}]})),
            (
                "items[0].port".into(),
                "invalid value: integer `70000`, expected u16".into()
            )
        );
        // A missing field is the struct's error: the path stops at the struct.
        assert_eq!(
            err(serde_json::json!({"name": "a", "items": [{"tag": "x"}]})).0,
            "items[0]"
        );
        assert_eq!(
            err(serde_json::json!({"items": []})),
            (".".into(), "missing field `name`".into())
        );
        assert_eq!(
            err(serde_json::json!({"name": "a", "labels": {"k": 1}})).0,
            "labels.k"
        );
        let (path, e) = err(serde_json::json!({"name": "a", "extra": 1}));
        assert_eq!(path, "extra");
        assert!(e.starts_with("unknown field `extra`"), "{e}");
    }
}
