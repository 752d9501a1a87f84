//! Documents of a manifest: JSON, or YAML with `---` separators (empty ones skipped), and
//! `kind: List` unrolled, as `kubectl apply -f` reads them.

use super::Error;
use serde::Deserialize;
use serde_json::Value;

pub fn documents(text: &str) -> Result<Vec<Value>, Error> {
    let mut docs = Vec::new();
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        for v in &mut stream {
            let v = v.map_err(|e| {
                Error::new(
                    format!("line {} column {}", e.line(), e.column()),
                    format!("invalid JSON: {e}"),
                )
            })?;
            push(&mut docs, v);
        }
    } else {
        for (n, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let v = Value::deserialize(de).map_err(|e| {
                let at = match e.location() {
                    Some(l) => format!("line {} column {}", l.line(), l.column()),
                    None => format!("document {}", n + 1),
                };
                Error::new(at, format!("invalid YAML: {e}"))
            })?;
            push(&mut docs, v);
        }
    }
    Ok(docs)
}

fn push(docs: &mut Vec<Value>, v: Value) {
    match v {
        Value::Null => {}
        Value::Array(items) => items.into_iter().for_each(|i| push(docs, i)),
        Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => {
            if let Some(Value::Array(items)) = o.get("items") {
                items.iter().cloned().for_each(|i| push(docs, i));
            }
        }
        v => docs.push(v),
    }
}
