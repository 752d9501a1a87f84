//! The D-Bus wire format (the D-Bus specification, "Message Protocol"): values marshalled
//! with their alignment, and whole messages (fixed header, header fields, body). Only the
//! types systemd's manager calls need: no dict entries, no file descriptors.

use std::fmt;

/// A value with its D-Bus type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Byte(u8),
    Bool(bool),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Str(String),
    Path(String),
    Sig(String),
    /// The element type's signature (an empty array needs it too) and the elements.
    Array(String, Vec<Value>),
    Struct(Vec<Value>),
    Variant(Box<Value>),
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(s.to_string())
    }

    /// A property of `a(sv)`: its name and its value.
    pub fn property(name: &str, v: Value) -> Value {
        Value::Struct(vec![Value::str(name), Value::Variant(Box::new(v))])
    }

    pub fn signature(&self) -> String {
        match self {
            Value::Byte(_) => "y".into(),
            Value::Bool(_) => "b".into(),
            Value::I32(_) => "i".into(),
            Value::U32(_) => "u".into(),
            Value::I64(_) => "x".into(),
            Value::U64(_) => "t".into(),
            Value::Str(_) => "s".into(),
            Value::Path(_) => "o".into(),
            Value::Sig(_) => "g".into(),
            Value::Array(e, _) => format!("a{e}"),
            Value::Struct(f) => format!("({})", f.iter().map(Value::signature).collect::<String>()),
            Value::Variant(_) => "v".into(),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::Path(s) | Value::Sig(s) => Some(s),
            _ => None,
        }
    }
}

/// A message that breaks the wire format.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed D-Bus message: {}", self.0)
    }
}

fn bad<T>(what: impl Into<String>) -> Result<T, Malformed> {
    Err(Malformed(what.into()))
}

/// The alignment of the type whose signature starts with `c`.
fn alignment(c: u8) -> usize {
    match c {
        b'y' | b'g' | b'v' => 1,
        b'n' | b'q' => 2,
        b'b' | b'i' | b'u' | b's' | b'o' | b'a' | b'h' => 4,
        _ => 8, // x t d ( {
    }
}

/// Little-endian marshalling; offsets count from the start of the buffer, which is where
/// alignment is measured from (a message's start, or its body's, which is 8-aligned).
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    fn pad(&mut self, to: usize) {
        while !self.buf.len().is_multiple_of(to) {
            self.buf.push(0);
        }
    }

    fn u32(&mut self, v: u32) {
        self.pad(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    fn string(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    fn sig(&mut self, s: &str) {
        self.buf.push(s.len() as u8);
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
    }

    pub fn put(&mut self, v: &Value) {
        match v {
            Value::Byte(b) => self.buf.push(*b),
            Value::Bool(b) => self.u32(u32::from(*b)),
            Value::I32(i) => self.u32(*i as u32),
            Value::U32(u) => self.u32(*u),
            Value::I64(i) => {
                self.pad(8);
                self.buf.extend_from_slice(&i.to_le_bytes());
            }
            Value::U64(u) => {
                self.pad(8);
                self.buf.extend_from_slice(&u.to_le_bytes());
            }
            Value::Str(s) | Value::Path(s) => self.string(s),
            Value::Sig(s) => self.sig(s),
            Value::Array(elem, items) => {
                self.u32(0);
                let len_at = self.buf.len() - 4;
                // The padding to the first element is not counted in the length, and is
                // there even when the array is empty.
                self.pad(alignment(elem.as_bytes().first().copied().unwrap_or(b'y')));
                let start = self.buf.len();
                for i in items {
                    self.put(i);
                }
                let len = (self.buf.len() - start) as u32;
                self.buf[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
            }
            Value::Struct(fields) => {
                self.pad(8);
                for f in fields {
                    self.put(f);
                }
            }
            Value::Variant(inner) => {
                self.sig(&inner.signature());
                self.put(inner);
            }
        }
    }
}

/// Unmarshalling of either byte order.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    little: bool,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], little: bool) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            little,
        }
    }

    fn align(&mut self, to: usize) -> Result<(), Malformed> {
        let next = self.pos.next_multiple_of(to);
        if next > self.buf.len() {
            return bad("padding runs past the end");
        }
        self.pos = next;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
        let Some(end) = end else {
            return bad(format!(
                "{n} bytes wanted at offset {}, past the end",
                self.pos
            ));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, Malformed> {
        self.align(4)?;
        let b: [u8; 4] = self.take(4)?.try_into().unwrap_or_default();
        Ok(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn u64(&mut self) -> Result<u64, Malformed> {
        self.align(8)?;
        let b: [u8; 8] = self.take(8)?.try_into().unwrap_or_default();
        Ok(if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }

    fn text(&mut self, len: usize) -> Result<String, Malformed> {
        let b = self.take(len + 1)?;
        if b[len] != 0 {
            return bad("a string without its NUL");
        }
        String::from_utf8(b[..len].to_vec()).or_else(|_| bad("a string that is not UTF-8"))
    }

    /// One value of the single complete type `sig`.
    pub fn get(&mut self, sig: &str) -> Result<Value, Malformed> {
        let Some(&c) = sig.as_bytes().first() else {
            return bad("an empty signature");
        };
        Ok(match c {
            b'y' => Value::Byte(self.take(1)?[0]),
            b'b' => match self.u32()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                n => return bad(format!("boolean {n}")),
            },
            b'i' => Value::I32(self.u32()? as i32),
            b'u' => Value::U32(self.u32()?),
            b'x' => Value::I64(self.u64()? as i64),
            b't' => Value::U64(self.u64()?),
            b's' | b'o' => {
                let n = self.u32()? as usize;
                let s = self.text(n)?;
                if c == b's' {
                    Value::Str(s)
                } else {
                    Value::Path(s)
                }
            }
            b'g' => {
                let n = self.take(1)?[0] as usize;
                Value::Sig(self.text(n)?)
            }
            b'a' => {
                let elem = &sig[1..1 + complete_type_len(&sig[1..])?];
                let n = self.u32()? as usize;
                self.align(alignment(elem.as_bytes()[0]))?;
                let end = self.pos + n;
                if end > self.buf.len() {
                    return bad("an array runs past the end");
                }
                let mut items = Vec::new();
                while self.pos < end {
                    items.push(self.get(elem)?);
                }
                if self.pos != end {
                    return bad("an array's elements overrun its length");
                }
                Value::Array(elem.to_string(), items)
            }
            b'(' | b'{' => {
                self.align(8)?;
                let inner = &sig[1..complete_type_len(sig)? - 1];
                Value::Struct(self.all(inner)?)
            }
            b'v' => {
                let n = self.take(1)?[0] as usize;
                let s = self.text(n)?;
                if complete_type_len(&s)? != s.len() {
                    return bad(format!("variant signature {s:?} is not one type"));
                }
                Value::Variant(Box::new(self.get(&s)?))
            }
            other => return bad(format!("type {:?} is not supported", other as char)),
        })
    }

    /// The values of every complete type in `sig`, in order.
    pub fn all(&mut self, mut sig: &str) -> Result<Vec<Value>, Malformed> {
        let mut out = Vec::new();
        while !sig.is_empty() {
            let n = complete_type_len(sig)?;
            out.push(self.get(&sig[..n])?);
            sig = &sig[n..];
        }
        Ok(out)
    }
}

/// The length of the single complete type at the start of `sig`.
fn complete_type_len(sig: &str) -> Result<usize, Malformed> {
    let b = sig.as_bytes();
    match b.first() {
        None => bad("a signature ends early"),
        Some(b'a') => Ok(1 + complete_type_len(&sig[1..])?),
        Some(&open @ (b'(' | b'{')) => {
            let close = if open == b'(' { b')' } else { b'}' };
            let mut i = 1;
            while b.get(i) != Some(&close) {
                if i >= b.len() {
                    return bad(format!("unclosed {:?} in signature {sig:?}", open as char));
                }
                i += complete_type_len(&sig[i..])?;
            }
            Ok(i + 1)
        }
        Some(c) if b"ybnqiuxtdsogvh".contains(c) => Ok(1),
        Some(c) => bad(format!(
            "unknown type {:?} in signature {sig:?}",
            *c as char
        )),
    }
}

/// A message's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    MethodCall = 1,
    MethodReturn = 2,
    Error = 3,
    Signal = 4,
}

/// A message: what its header says and its body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    pub kind: Option<Kind>,
    pub flags: u8,
    pub serial: u32,
    pub path: Option<String>,
    pub interface: Option<String>,
    pub member: Option<String>,
    pub error_name: Option<String>,
    pub reply_serial: Option<u32>,
    pub destination: Option<String>,
    pub sender: Option<String>,
    pub body: Vec<Value>,
}

// Header field codes.
const PATH: u8 = 1;
const INTERFACE: u8 = 2;
const MEMBER: u8 = 3;
const ERROR_NAME: u8 = 4;
const REPLY_SERIAL: u8 = 5;
const DESTINATION: u8 = 6;
const SENDER: u8 = 7;
const SIGNATURE: u8 = 8;

/// The fixed part of the header: what [`frame_len`] needs.
pub const FIXED: usize = 16;

/// The protocol's limit on a message's size.
const MAX_MESSAGE: usize = 1 << 27;

impl Message {
    /// A method call.
    pub fn call(
        destination: Option<&str>,
        path: &str,
        interface: &str,
        member: &str,
        body: Vec<Value>,
    ) -> Message {
        Message {
            kind: Some(Kind::MethodCall),
            path: Some(path.into()),
            interface: Some(interface.into()),
            member: Some(member.into()),
            destination: destination.map(Into::into),
            body,
            ..Message::default()
        }
    }

    pub fn signature(&self) -> String {
        self.body.iter().map(Value::signature).collect()
    }

    /// The bytes of this message, little-endian, with its serial.
    pub fn encode(&self, serial: u32) -> Vec<u8> {
        let mut body = Writer::default();
        for v in &self.body {
            body.put(v);
        }
        let mut fields = Vec::new();
        let mut field = |code: u8, v: Option<Value>| {
            if let Some(v) = v {
                fields.push(Value::Struct(vec![
                    Value::Byte(code),
                    Value::Variant(Box::new(v)),
                ]));
            }
        };
        field(PATH, self.path.clone().map(Value::Path));
        field(INTERFACE, self.interface.clone().map(Value::Str));
        field(MEMBER, self.member.clone().map(Value::Str));
        field(ERROR_NAME, self.error_name.clone().map(Value::Str));
        field(REPLY_SERIAL, self.reply_serial.map(Value::U32));
        field(DESTINATION, self.destination.clone().map(Value::Str));
        field(SENDER, self.sender.clone().map(Value::Str));
        let sig = self.signature();
        field(SIGNATURE, (!sig.is_empty()).then_some(Value::Sig(sig)));
        let mut w = Writer::default();
        w.buf
            .extend_from_slice(&[b'l', self.kind.map_or(0, |k| k as u8), self.flags, 1]);
        w.buf
            .extend_from_slice(&(body.buf.len() as u32).to_le_bytes());
        w.buf.extend_from_slice(&serial.to_le_bytes());
        w.put(&Value::Array("(yv)".into(), fields));
        w.pad(8);
        w.buf.extend_from_slice(&body.buf);
        w.buf
    }

    /// The message in `buf` (exactly one frame, [`frame_len`] long).
    pub fn decode(buf: &[u8]) -> Result<Message, Malformed> {
        let total = frame_len(buf)?;
        if buf.len() != total {
            return bad(format!("{} bytes for a message of {total}", buf.len()));
        }
        let little = buf[0] == b'l';
        let mut r = Reader::new(buf, little);
        r.pos = 4;
        let body_len = r.u32()? as usize;
        let serial = r.u32()?;
        let Value::Array(_, fields) = r.get("a(yv)")? else {
            return bad("no header fields");
        };
        r.align(8)?;
        let mut m = Message {
            kind: match buf[1] {
                1 => Some(Kind::MethodCall),
                2 => Some(Kind::MethodReturn),
                3 => Some(Kind::Error),
                4 => Some(Kind::Signal),
                _ => None, // unknown types are to be ignored, not refused
            },
            flags: buf[2],
            serial,
            ..Message::default()
        };
        let mut sig = String::new();
        for f in fields {
            let Value::Struct(f) = f else { continue };
            let (Some(Value::Byte(code)), Some(Value::Variant(v))) = (f.first(), f.get(1)) else {
                continue;
            };
            let s = v.as_str().map(str::to_string);
            match (*code, &**v) {
                (PATH, _) => m.path = s,
                (INTERFACE, _) => m.interface = s,
                (MEMBER, _) => m.member = s,
                (ERROR_NAME, _) => m.error_name = s,
                (REPLY_SERIAL, Value::U32(n)) => m.reply_serial = Some(*n),
                (DESTINATION, _) => m.destination = s,
                (SENDER, _) => m.sender = s,
                (SIGNATURE, _) => sig = s.unwrap_or_default(),
                _ => {}
            }
        }
        let body = &buf[r.pos..];
        if body.len() != body_len {
            return bad("the body's length disagrees with the header");
        }
        m.body = Reader::new(body, little).all(&sig)?;
        Ok(m)
    }
}

/// The length of the whole message whose first [`FIXED`] bytes `head` starts with.
pub fn frame_len(head: &[u8]) -> Result<usize, Malformed> {
    if head.len() < FIXED {
        return bad("a header shorter than 16 bytes");
    }
    let little = match head[0] {
        b'l' => true,
        b'B' => false,
        e => return bad(format!("byte order {:?}", e as char)),
    };
    if head[3] != 1 {
        return bad(format!("protocol version {}", head[3]));
    }
    let word = |i: usize| {
        let b: [u8; 4] = head[i..i + 4].try_into().unwrap_or_default();
        (if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }) as usize
    };
    let total = FIXED + word(12).next_multiple_of(8) + word(4);
    if total > MAX_MESSAGE {
        return bad(format!("a message of {total} bytes"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(values: &[Value]) -> Vec<u8> {
        let mut w = Writer::default();
        for v in values {
            w.put(v);
        }
        w.buf
    }

    #[test]
    fn basic_types_are_aligned_as_the_spec_says() {
        // y then u: three bytes of padding; then a string: length, bytes, NUL.
        assert_eq!(
            body(&[Value::Byte(7), Value::U32(1), Value::str("ab")]),
            [7, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, b'a', b'b', 0]
        );
        // A u64 after a bool: padded to 8.
        assert_eq!(
            body(&[Value::Bool(true), Value::U64(0x0102)]),
            [1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]
        );
        // A signature: one length byte, no padding.
        assert_eq!(body(&[Value::Sig("a(sv)".into())]), b"\x05a(sv)\0");
    }

    #[test]
    fn an_empty_array_of_structs_still_pads_to_its_elements() {
        // The length word (0) then padding to 8 for the first struct, which is not counted.
        assert_eq!(
            body(&[Value::Array("(sv)".into(), vec![])]),
            [0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            Value::Array("(sa(sv))".into(), vec![]).signature(),
            "a(sa(sv))"
        );
    }

    #[test]
    fn a_property_is_a_struct_of_name_and_variant() {
        // ("Delegate", <true>) in a(sv): as busctl sends it.
        let p = Value::property("Delegate", Value::Bool(true));
        assert_eq!(p.signature(), "(sv)");
        let b = body(&[Value::Array("(sv)".into(), vec![p.clone()])]);
        let want: &[u8] = &[
            20, 0, 0, 0, 0, 0, 0, 0, // length 20, padding to the struct
            8, 0, 0, 0, b'D', b'e', b'l', b'e', b'g', b'a', b't', b'e', 0, // "Delegate"
            1, b'b', 0, // variant signature "b"
            1, 0, 0, 0, // true (aligned to 4: offset 24)
        ];
        assert_eq!(b, want);
        let back = Reader::new(&b, true).get("a(sv)").unwrap();
        assert_eq!(back, Value::Array("(sv)".into(), vec![p]));
    }

    #[test]
    fn the_hello_call_is_byte_for_byte_the_spec_s() {
        // org.freedesktop.DBus.Hello as dbus-send/sd-bus send it (serial 1, no body).
        let m = Message::call(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus",
            "Hello",
            vec![],
        );
        let b = m.encode(1);
        let mut want = vec![b'l', 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0x6d, 0, 0, 0];
        // PATH (o)
        want.extend_from_slice(&[1, 1, b'o', 0, 21, 0, 0, 0]);
        want.extend_from_slice(b"/org/freedesktop/DBus\0");
        want.extend_from_slice(&[0, 0]); // to 8
                                         // INTERFACE (s)
        want.extend_from_slice(&[2, 1, b's', 0, 20, 0, 0, 0]);
        want.extend_from_slice(b"org.freedesktop.DBus\0");
        want.extend_from_slice(&[0, 0, 0]);
        // MEMBER (s)
        want.extend_from_slice(&[3, 1, b's', 0, 5, 0, 0, 0]);
        want.extend_from_slice(b"Hello\0");
        want.extend_from_slice(&[0, 0]);
        // DESTINATION (s), the last field: no padding counted after it
        want.extend_from_slice(&[6, 1, b's', 0, 20, 0, 0, 0]);
        want.extend_from_slice(b"org.freedesktop.DBus\0");
        want.extend_from_slice(&[0, 0, 0]); // header padded to 8, outside the array
        assert_eq!(b.len(), want.len());
        assert_eq!(b, want);
        assert_eq!(frame_len(&b).unwrap(), b.len());
        let back = Message::decode(&b).unwrap();
        assert_eq!(back.serial, 1);
        assert_eq!(back.member.as_deref(), Some("Hello"));
        assert_eq!(back.destination.as_deref(), Some("org.freedesktop.DBus"));
    }

    #[test]
    fn a_job_removed_signal_decodes() {
        // JobRemoved(u id, o job, s unit, s result) as systemd sends it, built here.
        let m = Message {
            kind: Some(Kind::Signal),
            path: Some("/org/freedesktop/systemd1".into()),
            interface: Some("org.freedesktop.systemd1.Manager".into()),
            member: Some("JobRemoved".into()),
            sender: Some(":1.0".into()),
            body: vec![
                Value::U32(42),
                Value::Path("/org/freedesktop/systemd1/job/42".into()),
                Value::str("runc-c1.scope"),
                Value::str("done"),
            ],
            ..Message::default()
        };
        let b = m.encode(9);
        let back = Message::decode(&b).unwrap();
        assert_eq!(back.kind, Some(Kind::Signal));
        assert_eq!(back.body, m.body);
        assert_eq!(back.sender.as_deref(), Some(":1.0"));
    }

    #[test]
    fn a_big_endian_reply_decodes() {
        // A method return, big-endian, serial 3, reply to 2, body "s" = "ok".
        let mut b = vec![b'B', 2, 1, 1, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 0x0f];
        b.extend_from_slice(&[5, 1, b'u', 0, 0, 0, 0, 2]); // REPLY_SERIAL 2
        b.extend_from_slice(&[8, 1, b'g', 0, 1, b's', 0]); // SIGNATURE "s"
        b.push(0); // header padding to 32
        b.extend_from_slice(&[0, 0, 0, 2, b'o', b'k', 0]);
        // Fields' length: 8 + 7 = 15.
        let m = Message::decode(&b).unwrap();
        assert_eq!(m.kind, Some(Kind::MethodReturn));
        assert_eq!(m.reply_serial, Some(2));
        assert_eq!(m.body, [Value::str("ok")]);
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        assert!(frame_len(b"short").is_err());
        assert!(frame_len(&[b'x'; 16]).is_err());
        let mut huge = vec![b'l', 2, 0, 1];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0; 8]);
        assert!(frame_len(&huge).is_err());
        // Truncations of a good message never panic.
        let good = Message::call(None, "/a", "b.c", "D", vec![Value::str("x")]).encode(5);
        for n in 0..good.len() {
            let _ = Message::decode(&good[..n]);
        }
        assert!(Reader::new(&[1, 0, 0, 0], true).get("(").is_err());
        assert!(Reader::new(&[3, 0, 0, 0, b'a'], true).get("s").is_err());
        assert!(Reader::new(&[2, 0, 0, 0], true).get("b").is_err());
    }

    #[test]
    fn start_transient_unit_s_arguments_round_trip() {
        let args = vec![
            Value::str("runc-c1.scope"),
            Value::str("replace"),
            Value::Array(
                "(sv)".into(),
                vec![
                    Value::property("Slice", Value::str("system.slice")),
                    Value::property("PIDs", Value::Array("u".into(), vec![Value::U32(1234)])),
                    Value::property("MemoryMax", Value::U64(1 << 30)),
                    Value::property(
                        "AllowedCPUs",
                        Value::Array("y".into(), vec![Value::Byte(0x0f)]),
                    ),
                ],
            ),
            Value::Array("(sa(sv))".into(), vec![]),
        ];
        let m = Message::call(
            Some("org.freedesktop.systemd1"),
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "StartTransientUnit",
            args.clone(),
        );
        assert_eq!(m.signature(), "ssa(sv)a(sa(sv))");
        let back = Message::decode(&m.encode(2)).unwrap();
        assert_eq!(back.body, args);
        assert_eq!(back.signature(), "ssa(sv)a(sa(sv))");
    }
}
