//! Schema-constrained decoding: a JSON Schema (the subset the method uses) compiled into a grammar,
//! and a matcher that says whether a byte sequence is still a prefix of a conforming JSON document.
//! The local model's sampler asks it, token by token, which candidates keep the output valid.
//!
//! Why our own: the crates that do this (llguidance, outlines-core) bring large dependency trees and
//! their own tokenizer abstractions; the subset needed here — objects with fixed keys, strings, integers
//! and numbers within bounds, enums, booleans, anyOf, arrays of bounded length — fits in a few hundred lines, and a byte-level
//! matcher works with any byte-level BPE vocabulary. Output is compact JSON (no insignificant
//! whitespace) with keys in the schema's order; strings are capped so a reply always ends.

use serde_json::Value;

/// Strings without `maxLength` are capped at this many characters.
pub const DEFAULT_MAX_STRING: usize = 400;

/// Arrays without `maxItems` are capped at this many items (the grammar unrolls them).
pub const DEFAULT_MAX_ITEMS: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Exactly these bytes.
    Lit(Vec<u8>),
    /// One after another.
    Seq(Vec<Node>),
    /// Any one of these.
    Choice(Vec<Node>),
    /// A JSON string of `min` to `max` characters.
    Str { min: usize, max: usize },
}

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("unsupported schema at {path}: {message}")]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

fn lit(s: &str) -> Node {
    Node::Lit(s.as_bytes().to_vec())
}

fn digits(from: char, to: char) -> Node {
    Node::Choice((from..=to).map(|c| lit(&c.to_string())).collect())
}

/// Integers from `lo` to `hi` as a choice of literals (the method's ranges are small: at most 0–100).
fn integers(lo: i64, hi: i64) -> Node {
    Node::Choice((lo..=hi).map(|v| lit(&v.to_string())).collect())
}

/// Keywords that narrow what a value may be beyond what the grammar can say: followed silently,
/// they would let through replies the schema refuses, so a schema with one is refused by name.
const UNSUPPORTED: &[&str] = &[
    "pattern",
    "format",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "uniqueItems",
    "contains",
    "minProperties",
    "maxProperties",
    "patternProperties",
    "propertyNames",
    "allOf",
    "not",
    "if",
    "$ref",
];

/// Compiles `schema` into a grammar. Supported: `type` object (all `properties`, in order), string
/// (`minLength`, `maxLength`), integer and number (`minimum`/`maximum`, at most 1,001 whole values), boolean, null,
/// array (`items`, `minItems`/`maxItems`, at most 64 items), `enum`, `const`, `anyOf`/`oneOf`.
pub fn compile(schema: &Value) -> Result<Node, SchemaError> {
    compile_at(schema, "#")
}

fn compile_at(schema: &Value, path: &str) -> Result<Node, SchemaError> {
    let fail = |message: &str| SchemaError {
        path: path.to_string(),
        message: message.to_string(),
    };
    if let Some(key) = UNSUPPORTED.iter().find(|k| schema.get(**k).is_some()) {
        return Err(fail(&format!(
            "{key:?} is not supported by the local model's constrained decoding (leave it out, or use a \
             provider that supports it)"
        )));
    }
    if let Some(c) = schema.get("const") {
        return Ok(lit(&c.to_string()));
    }
    if let Some(values) = schema.get("enum") {
        let values = values
            .as_array()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| fail("enum must be a non-empty list"))?;
        return Ok(Node::Choice(values.iter().map(|v| lit(&v.to_string())).collect()));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key) {
            let options = options
                .as_array()
                .filter(|o| !o.is_empty())
                .ok_or_else(|| fail("anyOf must be a non-empty list"))?;
            return options
                .iter()
                .enumerate()
                .map(|(i, o)| compile_at(o, &format!("{path}/{key}/{i}")))
                .collect::<Result<_, _>>()
                .map(Node::Choice);
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => {
            let options: Result<Vec<Node>, _> = types
                .iter()
                .map(|t| {
                    let mut single = schema.clone();
                    single["type"] = t.clone();
                    compile_at(&single, path)
                })
                .collect();
            return options.map(Node::Choice);
        }
        None if schema.get("properties").is_some() => "object",
        _ => return Err(fail("needs a type, enum, const or anyOf")),
    };
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    match kind {
        "object" => {
            let props = schema
                .get("properties")
                .and_then(Value::as_object)
                .ok_or_else(|| fail("an object needs properties"))?;
            if props.is_empty() {
                return Ok(lit("{}"));
            }
            let mut parts = Vec::new();
            for (i, (name, sub)) in props.iter().enumerate() {
                let key = Value::String(name.clone()).to_string();
                parts.push(lit(&format!("{}{key}:", if i == 0 { "{" } else { "," })));
                parts.push(compile_at(sub, &format!("{path}/properties/{name}"))?);
            }
            parts.push(lit("}"));
            Ok(Node::Seq(parts))
        }
        "string" => {
            let length = |key: &str| schema.get(key).and_then(Value::as_u64).map(|n| n as usize);
            let min = length("minLength").unwrap_or(0);
            let max = length("maxLength").unwrap_or(DEFAULT_MAX_STRING.max(min));
            if min > max {
                return Err(fail(&format!("minLength {min} is above maxLength {max}")));
            }
            Ok(Node::Str { min, max })
        }
        "integer" | "number" => number(kind == "integer", bound("minimum"), bound("maximum")).map_err(|m| fail(&m)),
        "array" => {
            let items = schema.get("items").ok_or_else(|| fail("an array needs items"))?;
            let item = compile_at(items, &format!("{path}/items"))?;
            let count = |key: &str| schema.get(key).and_then(Value::as_u64).map(|n| n as usize);
            let min = count("minItems").unwrap_or(0);
            let max = count("maxItems").unwrap_or(DEFAULT_MAX_ITEMS.max(min));
            if min > max {
                return Err(fail("minItems is above maxItems"));
            }
            if max > 64 {
                return Err(fail("at most 64 items are supported"));
            }
            // Unrolled: `[`, the required items, then each optional one either ends the array or
            // continues it. A list of n items costs n grammar nodes, not n².
            let mut tail = lit("]");
            for _ in min.max(1)..max {
                tail = Node::Choice(vec![lit("]"), Node::Seq(vec![lit(","), item.clone(), tail])]);
            }
            if max == 0 {
                return Ok(lit("[]"));
            }
            let mut parts = vec![lit("[")];
            if min == 0 {
                parts.push(Node::Choice(vec![lit("]"), Node::Seq(vec![item.clone(), tail])]));
            } else {
                parts.push(item.clone());
                for _ in 1..min {
                    parts.push(lit(","));
                    parts.push(item.clone());
                }
                parts.push(tail);
            }
            Ok(Node::Seq(parts))
        }
        "boolean" => Ok(Node::Choice(vec![lit("true"), lit("false")])),
        "null" => Ok(lit("null")),
        other => Err(fail(&format!("type {other:?} is not supported"))),
    }
}

/// The grammar of an integer, or a number of up to two decimals, within `[minimum, maximum]` (both
/// needed, at most 1,001 whole values apart).
fn number(integer: bool, minimum: Option<f64>, maximum: Option<f64>) -> Result<Node, String> {
    let (lo, hi) = match (minimum, maximum) {
        (Some(lo), Some(hi)) if lo <= hi => (lo, hi),
        (Some(lo), Some(hi)) => return Err(format!("minimum {lo} is above maximum {hi}")),
        _ => return Err("numbers need both minimum and maximum".into()),
    };
    let (ilo, ihi) = (lo.ceil() as i64, hi.floor() as i64);
    if ihi - ilo > 1000 {
        return Err("the range is too wide (more than 1,001 whole values)".into());
    }
    if integer {
        if ilo > ihi {
            return Err("no integer lies within the bounds".into());
        }
        return Ok(integers(ilo, ihi));
    }
    // Whole part, then up to two decimals while staying below the maximum.
    let fraction = Node::Choice(vec![
        Node::Seq(vec![]),
        Node::Seq(vec![
            lit("."),
            digits('0', '9'),
            Node::Choice(vec![Node::Seq(vec![]), digits('0', '9')]),
        ]),
    ]);
    let mut options = Vec::new();
    if ilo < ihi {
        options.push(Node::Seq(vec![integers(ilo, ihi - 1), fraction]));
    }
    if ilo <= ihi {
        options.push(lit(&ihi.to_string()));
    }
    if options.is_empty() {
        return Err("no value lies within the bounds".into());
    }
    Ok(Node::Choice(options))
}

/// Where one path through the grammar stands.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Frame {
    /// `pos` bytes of the literal matched.
    Lit { node: usize, pos: usize },
    /// Child `next` of the sequence comes after the current one.
    Seq { node: usize, next: usize },
    Str {
        /// Characters the string needs before its closing quote.
        min: usize,
        max: usize,
        chars: usize,
        escape: Escape,
        utf8_pending: u8,
        /// The bytes the next continuation byte may be (narrower after some lead bytes, so that no
        /// overlong form, surrogate or code point above U+10FFFF gets through).
        utf8_next: (u8, u8),
    },
}

/// Any continuation byte.
const CONTINUATION: (u8, u8) = (0x80, 0xBF);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Escape {
    /// Before the opening quote.
    Opening,
    None,
    Backslash,
    /// Hex digits of a \u escape still to come.
    Unicode(u8),
}

/// The grammar flattened into an arena so frames can point at nodes by index.
#[derive(Debug, Clone)]
struct Arena {
    nodes: Vec<Flat>,
}

#[derive(Debug, Clone)]
enum Flat {
    Lit(Vec<u8>),
    Seq(Vec<usize>),
    Choice(Vec<usize>),
    Str { min: usize, max: usize },
}

impl Arena {
    fn add(&mut self, node: &Node) -> usize {
        let flat = match node {
            Node::Lit(b) => Flat::Lit(b.clone()),
            Node::Str { min, max } => Flat::Str { min: *min, max: *max },
            Node::Seq(children) => Flat::Seq(children.iter().map(|c| self.add(c)).collect()),
            Node::Choice(children) => Flat::Choice(children.iter().map(|c| self.add(c)).collect()),
        };
        self.nodes.push(flat);
        self.nodes.len() - 1
    }
}

/// All live paths through the grammar after the bytes fed so far.
#[derive(Debug, Clone)]
pub struct Matcher {
    arena: std::sync::Arc<Arena>,
    stacks: Vec<Vec<Frame>>,
}

impl Matcher {
    pub fn new(grammar: &Node) -> Matcher {
        let mut arena = Arena { nodes: Vec::new() };
        let root = arena.add(grammar);
        let arena = std::sync::Arc::new(arena);
        let mut stacks = Vec::new();
        push_node(&arena, Vec::new(), root, &mut stacks);
        let mut m = Matcher { arena, stacks };
        m.dedup();
        m
    }

    /// A full document has been produced (on some path).
    pub fn is_complete(&self) -> bool {
        self.stacks.iter().any(Vec::is_empty)
    }

    /// Nothing more can follow: every path is complete.
    pub fn is_finished(&self) -> bool {
        self.stacks.iter().all(Vec::is_empty)
    }

    /// Would these bytes keep the output a valid prefix?
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        let mut m = self.clone();
        m.feed(bytes)
    }

    /// Feeds bytes; returns false (and becomes dead) if they break the grammar.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            let mut next = Vec::new();
            for stack in std::mem::take(&mut self.stacks) {
                step(&self.arena, stack, b, &mut next);
            }
            self.stacks = next;
            self.dedup();
            if self.stacks.is_empty() {
                return false;
            }
        }
        true
    }

    fn dedup(&mut self) {
        if self.stacks.len() > 1 {
            let mut seen = std::collections::HashSet::new();
            self.stacks.retain(|s| seen.insert(s.clone()));
        }
    }
}

/// The vocabulary's token bytes as a trie: every token a matcher accepts is found by walking it, each
/// shared prefix fed once and a rejected prefix cutting off every token under it. Where a schema leaves
/// few choices (inside a key, after a colon) this costs microseconds where trying each token of a
/// 49,152-token vocabulary costs tens of milliseconds.
pub struct TokenTrie {
    nodes: Vec<TrieNode>,
}

#[derive(Default)]
struct TrieNode {
    children: Vec<(u8, usize)>,
    /// Tokens whose bytes end here.
    ids: Vec<u32>,
}

impl TokenTrie {
    /// `tokens[id]`: the bytes token `id` stands for (`None` or empty: never part of a document).
    pub fn new(tokens: &[Option<Vec<u8>>]) -> TokenTrie {
        let mut nodes = vec![TrieNode::default()];
        for (id, bytes) in tokens.iter().enumerate() {
            let Some(bytes) = bytes.as_deref().filter(|b| !b.is_empty()) else {
                continue;
            };
            let mut at = 0;
            for &b in bytes {
                at = match nodes[at].children.iter().find(|(c, _)| *c == b) {
                    Some(&(_, child)) => child,
                    None => {
                        nodes.push(TrieNode::default());
                        let child = nodes.len() - 1;
                        nodes[at].children.push((b, child));
                        child
                    }
                };
            }
            nodes[at].ids.push(id as u32);
        }
        TokenTrie { nodes }
    }

    /// Every token whose bytes `m` accepts.
    pub fn accepted(&self, m: &Matcher) -> Vec<u32> {
        let mut out = Vec::new();
        self.walk(0, m, &mut out);
        out
    }

    fn walk(&self, node: usize, m: &Matcher, out: &mut Vec<u32>) {
        for &(b, child) in &self.nodes[node].children {
            let mut next = m.clone();
            if next.feed(&[b]) {
                out.extend_from_slice(&self.nodes[child].ids);
                self.walk(child, &next, out);
            }
        }
    }
}

/// Pushes `node` on `stack` and settles: every resulting stack has a terminal (a literal with bytes
/// left, or a string) on top, or is empty (complete).
fn push_node(arena: &Arena, mut stack: Vec<Frame>, node: usize, out: &mut Vec<Vec<Frame>>) {
    match &arena.nodes[node] {
        Flat::Lit(bytes) if bytes.is_empty() => settle(arena, stack, out),
        Flat::Lit(_) => {
            stack.push(Frame::Lit { node, pos: 0 });
            out.push(stack);
        }
        Flat::Str { min, max } => {
            stack.push(Frame::Str {
                min: *min,
                max: *max,
                chars: 0,
                escape: Escape::Opening,
                utf8_pending: 0,
                utf8_next: CONTINUATION,
            });
            out.push(stack);
        }
        Flat::Seq(children) if children.is_empty() => settle(arena, stack, out),
        Flat::Seq(_) => {
            stack.push(Frame::Seq { node, next: 1 });
            let Flat::Seq(children) = &arena.nodes[node] else {
                unreachable!()
            };
            push_node(arena, stack, children[0], out);
        }
        Flat::Choice(children) => {
            for &child in children {
                push_node(arena, stack.clone(), child, out);
            }
        }
    }
}

/// The top frame just completed (or there was none): continue with the enclosing sequence.
fn settle(arena: &Arena, mut stack: Vec<Frame>, out: &mut Vec<Vec<Frame>>) {
    match stack.pop() {
        None => out.push(stack),
        Some(Frame::Seq { node, next }) => {
            let Flat::Seq(children) = &arena.nodes[node] else {
                unreachable!("Seq frames point at Seq nodes")
            };
            if next < children.len() {
                stack.push(Frame::Seq { node, next: next + 1 });
                push_node(arena, stack, children[next], out);
            } else {
                settle(arena, stack, out);
            }
        }
        Some(other) => unreachable!("settle pops only sequences, found {other:?}"),
    }
}

fn step(arena: &Arena, mut stack: Vec<Frame>, b: u8, out: &mut Vec<Vec<Frame>>) {
    let Some(top) = stack.pop() else { return }; // complete: nothing may follow
    match top {
        Frame::Lit { node, pos } => {
            let Flat::Lit(bytes) = &arena.nodes[node] else {
                unreachable!("Lit frames point at Lit nodes")
            };
            if bytes.get(pos) == Some(&b) {
                if pos + 1 == bytes.len() {
                    settle(arena, stack, out);
                } else {
                    stack.push(Frame::Lit { node, pos: pos + 1 });
                    out.push(stack);
                }
            }
        }
        Frame::Str {
            min,
            max,
            chars,
            escape,
            utf8_pending,
            utf8_next,
        } => {
            let mut push = |s: Frame| {
                let mut st = stack.clone();
                st.push(s);
                out.push(st);
            };
            match escape {
                Escape::Opening => {
                    if b == b'"' {
                        push(Frame::Str {
                            min,
                            max,
                            chars,
                            escape: Escape::None,
                            utf8_pending: 0,
                            utf8_next: CONTINUATION,
                        });
                    }
                }
                Escape::Backslash => {
                    if b"\"\\/bfnrt".contains(&b) {
                        push(Frame::Str {
                            min,
                            max,
                            chars: chars + 1,
                            escape: Escape::None,
                            utf8_pending: 0,
                            utf8_next: CONTINUATION,
                        });
                    } else if b == b'u' {
                        push(Frame::Str {
                            min,
                            max,
                            chars,
                            escape: Escape::Unicode(4),
                            utf8_pending: 0,
                            utf8_next: CONTINUATION,
                        });
                    }
                }
                Escape::Unicode(left) => {
                    if b.is_ascii_hexdigit() {
                        let (escape, chars) = if left == 1 {
                            (Escape::None, chars + 1)
                        } else {
                            (Escape::Unicode(left - 1), chars)
                        };
                        push(Frame::Str {
                            min,
                            max,
                            chars,
                            escape,
                            utf8_pending: 0,
                            utf8_next: CONTINUATION,
                        });
                    }
                }
                Escape::None if utf8_pending > 0 => {
                    if (utf8_next.0..=utf8_next.1).contains(&b) {
                        push(Frame::Str {
                            min,
                            max,
                            chars,
                            escape,
                            utf8_pending: utf8_pending - 1,
                            utf8_next: CONTINUATION,
                        });
                    }
                }
                Escape::None => {
                    if b == b'"' {
                        // Closed only once it is long enough.
                        if chars >= min {
                            settle(arena, stack, out);
                        }
                    } else if chars >= max || b < 0x20 {
                        // Full (only the closing quote may come) or a raw control character.
                    } else if b == b'\\' {
                        push(Frame::Str {
                            min,
                            max,
                            chars,
                            escape: Escape::Backslash,
                            utf8_pending: 0,
                            utf8_next: CONTINUATION,
                        });
                    } else if b < 0x80 {
                        push(Frame::Str {
                            min,
                            max,
                            chars: chars + 1,
                            escape,
                            utf8_pending: 0,
                            utf8_next: CONTINUATION,
                        });
                    } else {
                        let (pending, next) = match b {
                            0xC2..=0xDF => (1, CONTINUATION),
                            0xE0 => (2, (0xA0, 0xBF)),
                            0xED => (2, (0x80, 0x9F)),
                            0xE1..=0xEF => (2, CONTINUATION),
                            0xF0 => (3, (0x90, 0xBF)),
                            0xF4 => (3, (0x80, 0x8F)),
                            0xF1..=0xF3 => (3, CONTINUATION),
                            _ => return,
                        };
                        push(Frame::Str {
                            min,
                            max,
                            chars: chars + 1,
                            escape,
                            utf8_pending: pending,
                            utf8_next: next,
                        });
                    }
                }
            }
        }
        Frame::Seq { .. } => unreachable!("a sequence is never on top after settling"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn matcher(schema: Value) -> Matcher {
        Matcher::new(&compile(&schema).unwrap())
    }

    fn full(schema: &Value, text: &str) -> bool {
        let mut m = Matcher::new(&compile(schema).unwrap());
        m.feed(text.as_bytes()) && m.is_complete()
    }

    fn prefix(schema: &Value, text: &str) -> bool {
        matcher(schema.clone()).accepts(text.as_bytes())
    }

    #[test]
    fn expert_rating_objects() {
        let s = json!({"type": "object", "properties": {
            "analysis": {"type": "string"},
            "result": {"anyOf": [{"type": "number", "minimum": 1, "maximum": 5}, {"enum": ["x"]}]}},
            "required": ["analysis", "result"]});
        assert!(full(&s, r#"{"analysis":"She is outgoing.","result":4.5}"#));
        assert!(full(&s, r#"{"analysis":"","result":5}"#));
        assert!(full(&s, r#"{"analysis":"refuses","result":"x"}"#));
        assert!(full(&s, r#"{"analysis":"a","result":1.25}"#));
        assert!(!full(&s, r#"{"analysis":"a","result":5.5}"#), "above the maximum");
        assert!(!full(&s, r#"{"analysis":"a","result":0}"#), "below the minimum");
        assert!(!full(&s, r#"{"result":4,"analysis":"a"}"#), "keys in schema order");
        assert!(!full(&s, r#"{"analysis":"a","result":4"#), "unfinished");
        assert!(prefix(&s, r#"{"analysis":"a","result":4"#));
        assert!(!prefix(&s, r#"{"analysis":"a","result":6"#));
        assert!(!prefix(&s, r#"{ "analysis""#), "no insignificant whitespace");
    }

    #[test]
    fn numbers_at_the_bounds() {
        let int = json!({"type": "integer", "minimum": 0, "maximum": 100});
        for v in ["0", "7", "42", "100"] {
            assert!(full(&int, v), "{v}");
        }
        for v in ["101", "-1", "1.5", "007", "1000"] {
            assert!(!full(&int, v), "{v}");
        }
        let pct = json!({"type": "number", "minimum": 0, "maximum": 100});
        assert!(full(&pct, "99.99") && full(&pct, "100") && full(&pct, "0.5"));
        assert!(!full(&pct, "100.5") && !full(&pct, "1.") && !full(&pct, "1.234"));
        let neg = json!({"type": "integer", "minimum": -2, "maximum": 2});
        assert!(full(&neg, "-2") && full(&neg, "2") && !full(&neg, "-3"));
    }

    #[test]
    fn strings_escapes_unicode_and_caps() {
        let s = json!({"type": "string", "maxLength": 5});
        assert!(full(&s, r#""a\"b""#));
        assert!(full(&s, r#""\u00e9\n""#));
        assert!(full(&s, "\"钟离好\""));
        assert!(!full(&s, "\"abcdef\""), "six characters > maxLength 5");
        assert!(!full(&s, "\"a\u{1}\""), "raw control characters are not JSON");
        assert!(!full(&s, r#""\x""#), "unknown escape");
        assert!(!full(&s, r#""\u12g4""#));
        // A multi-byte character may arrive split across tokens; its continuation bytes are checked.
        let mut m = matcher(s.clone());
        let bytes = "\"钟".as_bytes();
        assert!(m.feed(&bytes[..2]) && !m.accepts(b"\"") && m.feed(&bytes[2..]) && m.feed(b"\""));
        assert!(m.is_complete());
        // Only valid UTF-8: no overlong forms, surrogates or code points above U+10FFFF, whichever
        // bytes a random model offers (every accepted string must decode).
        let m = matcher(s);
        for bad in [
            &b"\"\xC0\x80"[..],
            b"\"\xE0\x80\x80",
            b"\"\xED\xA0\x80",
            b"\"\xF0\x80\x80\x80",
            b"\"\xF4\x90\x80\x80",
        ] {
            assert!(!m.accepts(bad), "{bad:?}");
        }
        for good in [
            "\"\u{7FF}",
            "\"\u{800}",
            "\"\u{D7FF}",
            "\"\u{E000}",
            "\"\u{10000}",
            "\"\u{10FFFF}",
        ] {
            assert!(m.accepts(good.as_bytes()), "{good:?}");
        }
    }

    #[test]
    fn the_trie_finds_exactly_the_tokens_the_matcher_accepts() {
        let vocab: Vec<Option<Vec<u8>>> = ["{", "{\"", "{\"a", "\"", "a", "ab", "b", "\":", "}", "1", "12", " "]
            .iter()
            .map(|t| Some(t.as_bytes().to_vec()))
            .chain([None, Some(Vec::new())])
            .collect();
        let trie = TokenTrie::new(&vocab);
        let schema = json!({"type": "object", "properties": {"ab": {"type": "integer", "minimum": 1, "maximum": 20}}});
        let mut m = matcher(schema);
        for prefix in [&b""[..], b"{", b"{\"a", b"{\"ab\":", b"{\"ab\":1"] {
            assert!(m.accepts(prefix));
            let mut at = m.clone();
            at.feed(prefix);
            let mut expected: Vec<u32> = (0..vocab.len() as u32)
                .filter(|&id| {
                    vocab[id as usize]
                        .as_deref()
                        .is_some_and(|b| !b.is_empty() && at.accepts(b))
                })
                .collect();
            let mut found = trie.accepted(&at);
            found.sort_unstable();
            expected.sort_unstable();
            assert_eq!(found, expected, "after {:?}", String::from_utf8_lossy(prefix));
        }
        m.feed(b"{");
        assert_eq!(trie.accepted(&m), vec![3], "only the key's opening quote");
    }

    #[test]
    fn enums_booleans_objects_of_options() {
        let oc = json!({"type": "object", "properties": {
            "1": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 7}, {"enum": ["x"]}]},
            "2": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 7}, {"enum": ["x"]}]},
            "ok": {"type": "boolean"}}});
        assert!(full(&oc, r#"{"1":7,"2":"x","ok":true}"#));
        assert!(!full(&oc, r#"{"1":8,"2":"x","ok":true}"#));
        assert!(!full(&oc, r#"{"1":"y","2":"x","ok":true}"#));
        let m = matcher(json!({"const": "end"}));
        assert!(m.accepts(b"\"en") && !m.is_complete());
        let turn =
            json!({"type": "object", "properties": {"utterance": {"type": "string"}, "end": {"type": "boolean"}}});
        assert!(full(&turn, r#"{"utterance":"Hello, 旅行者!","end":false}"#));
    }

    #[test]
    fn completion_is_tracked() {
        let s = json!({"type": "integer", "minimum": 1, "maximum": 12});
        let mut m = matcher(s);
        assert!(m.feed(b"1"));
        assert!(
            m.is_complete() && !m.is_finished(),
            "1 is complete, 10-12 can still follow"
        );
        assert!(m.feed(b"2") && m.is_finished());
        assert!(!m.feed(b"3") && m.stacks.is_empty(), "no way on is left");
    }

    #[test]
    fn unsupported_schemas_say_where() {
        let e = compile(&json!({"type": "object", "properties": {"a": {"type": "number"}}})).unwrap_err();
        assert_eq!(e.path, "#/properties/a");
        let e = compile(&json!({"type": "array"})).unwrap_err();
        assert_eq!(e.message, "an array needs items");
        let e =
            compile(&json!({"type": "array", "items": {"type": "boolean"}, "minItems": 3, "maxItems": 2})).unwrap_err();
        assert_eq!(e.message, "minItems is above maxItems");
        // Bounds the wrong way round are told as such, not as missing.
        let e = compile(&json!({"type": "integer", "minimum": 5, "maximum": 1})).unwrap_err();
        assert_eq!(e.message, "minimum 5 is above maximum 1");
        let e = compile(&json!({"type": "string", "minLength": 5, "maxLength": 1})).unwrap_err();
        assert_eq!(e.message, "minLength 5 is above maxLength 1");
    }

    /// A keyword the grammar cannot follow is refused by name where it stands, never ignored (the
    /// reply would break it).
    #[test]
    fn keywords_the_grammar_cannot_follow_are_refused_by_name() {
        for (keyword, value) in [
            ("pattern", json!("^[a-z]+$")),
            ("format", json!("date")),
            ("exclusiveMinimum", json!(0)),
            ("multipleOf", json!(2)),
        ] {
            let mut property = json!({"type": "string"});
            property[keyword] = value;
            let e = compile(&json!({"type": "object", "properties": {"a": property}})).unwrap_err();
            assert_eq!(e.path, "#/properties/a");
            assert!(
                e.message.starts_with(&format!(
                    "\"{keyword}\" is not supported by the local model's constrained decoding"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn a_string_closes_only_once_it_has_its_minimum_length() {
        let s = json!({"type": "string", "minLength": 3, "maxLength": 4});
        assert!(!prefix(&s, r#""ab""#), "closed before its minimum");
        assert!(full(&s, r#""abc""#));
        // Characters, not bytes: an escape and a two-byte letter count one each.
        assert!(full(&s, r#""\né!""#));
        assert!(!prefix(&s, r#""é!""#));
        assert!(!prefix(&s, r#""abcde"#), "past its maximum");
        // A minimum above the default cap raises the cap with it.
        let long = json!({"type": "string", "minLength": 500});
        let text = format!("\"{}\"", "x".repeat(500));
        assert!(full(&long, &text));
        assert!(!prefix(&long, &format!("\"{}\"", "x".repeat(499))));
    }

    #[test]
    fn arrays_hold_between_min_and_max_items() {
        let s = json!({"type": "object", "properties": {"scenarios": {"type": "array",
            "items": {"type": "string"}, "minItems": 2, "maxItems": 3}}});
        assert!(!full(&s, r#"{"scenarios":["a"]}"#), "too few");
        assert!(!prefix(&s, r#"{"scenarios":["a"]"#), "cannot close before the minimum");
        assert!(full(&s, r#"{"scenarios":["a","b"]}"#));
        assert!(full(&s, r#"{"scenarios":["a","b","c, d"]}"#));
        assert!(!full(&s, r#"{"scenarios":["a","b","c","d"]}"#), "too many");
        assert!(!prefix(&s, r#"{"scenarios":["a","b","c","#));
        let any = json!({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 5}});
        assert!(full(&any, "[]"));
        assert!(full(&any, "[1,5,3]"));
        assert!(!full(&any, "[1,]"));
        assert!(!full(&any, "[6]"));
        let sixteen = format!("[{}]", vec!["1"; DEFAULT_MAX_ITEMS].join(","));
        assert!(full(&any, &sixteen));
        assert!(!full(&any, &format!("[1,{}", &sixteen[1..])), "capped at the default");
        let none = json!({"type": "array", "items": {"type": "null"}, "maxItems": 0});
        assert!(full(&none, "[]") && !prefix(&none, "[n"));
    }
}
