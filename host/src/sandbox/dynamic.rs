//! Generic components: a component that does not export `bb7:tool/tool`. Every exported function,
//! at the top level or inside an exported interface, is a tool; its JSON Schema is derived from the
//! WIT types (the mapping of wassette's `component2json`, ECOSYSTEM-PROTOCOL.md §5), and it is
//! called dynamically with [`Val`]s converted from and to JSON. Functions whose types hold a
//! resource, stream or future are skipped, with the reason. A `map<K, V>` is an array of `[key,
//! value]` pairs (keys unique) and a fixed-length `list<T, N>` an array of exactly N items; the
//! engine validates both (`engine_config.rs`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use wasmtime::component::types::{ComponentFunc, ComponentItem};
use wasmtime::component::{Component, ComponentExportIndex, InstancePre, Type, Val};
use wasmtime::{Engine, Store};

/// The custom section holding a package's documentation (`wit-docs-inject`'s format).
pub const PACKAGE_DOCS_SECTION: &str = "package-docs";

/// Why a component's exports cannot be offered as tools.
#[derive(Debug, thiserror::Error)]
pub enum GenericError {
    /// Two exports map to the same tool name, even interface-prefixed.
    #[error("two exported functions map to the same tool name {tool}: {first} and {second}")]
    Collision {
        /// The tool name.
        tool: String,
        /// The first export.
        first: String,
        /// The second export.
        second: String,
    },
    /// Nothing to offer.
    #[error(
        "the component exports neither a bb7:tool interface nor any function that can be offered as a tool{skipped}"
    )]
    NoFunctions {
        /// The skipped functions and why, worded.
        skipped: String,
    },
}

/// One exported function offered as a tool.
#[derive(Clone)]
pub struct GenericFunction {
    /// The tool's name inside the component (`read_file`; `iface_read_file` on a clash).
    pub tool: String,
    /// The export as WIT names it: `read-file`, or `ns:pkg/iface@1.0.0#read-file`.
    pub export: String,
    /// Its documentation from the `package-docs` section, if any.
    pub docs: Option<String>,
    /// The JSON Schema of its arguments (an object of the named parameters).
    pub schema: Value,
    params: Vec<(String, Type)>,
    index: ComponentExportIndex,
}

/// An exported function that is not offered, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedFunction {
    /// The export as WIT names it.
    pub export: String,
    /// Why it is not offered.
    pub reason: String,
}

/// What a generic component offers.
#[derive(Clone, Default)]
pub struct GenericExports {
    /// The offered functions, in export order.
    pub functions: Vec<GenericFunction>,
    /// The functions left out.
    pub skipped: Vec<SkippedFunction>,
}

/// A generic component linked and ready to instantiate, with the function a call runs (`None`: the
/// component as a whole, which cannot be called until a function is chosen).
pub struct GenericPre<T: 'static> {
    pub(crate) pre: InstancePre<T>,
    pub(crate) exports: std::sync::Arc<GenericExports>,
    pub(crate) selected: Option<usize>,
}

impl<T: 'static> Clone for GenericPre<T> {
    fn clone(&self) -> Self {
        GenericPre {
            pre: self.pre.clone(),
            exports: self.exports.clone(),
            selected: self.selected,
        }
    }
}

/// Every exported function of `component`, mapped to tools; `bytes` are its WebAssembly (for the
/// `package-docs` section).
pub fn inspect(
    engine: &Engine,
    component: &Component,
    bytes: &[u8],
) -> Result<GenericExports, GenericError> {
    let docs = PackageDocs::read(bytes);
    struct Found {
        name: String,
        iface: Option<String>,
        export: String,
        docs: Option<String>,
        func: ComponentFunc,
        index: ComponentExportIndex,
    }
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let ty = component.component_type();
    for (name, ext) in ty.exports(engine) {
        match ext.ty {
            ComponentItem::ComponentFunc(func) => {
                if let Some(index) = component.get_export_index(None, name) {
                    found.push(Found {
                        name: name.to_string(),
                        iface: None,
                        export: name.to_string(),
                        docs: docs.world_func(name),
                        func,
                        index,
                    });
                }
            }
            ComponentItem::ComponentInstance(inst) => {
                let Some(iidx) = component.get_export_index(None, name) else {
                    continue;
                };
                for (fname, fext) in inst.exports(engine) {
                    if let ComponentItem::ComponentFunc(func) = fext.ty
                        && let Some(index) = component.get_export_index(Some(&iidx), fname)
                    {
                        found.push(Found {
                            name: fname.to_string(),
                            iface: Some(name.to_string()),
                            export: format!("{name}#{fname}"),
                            docs: docs.interface_func(name, fname),
                            func,
                            index,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    let mut offered = Vec::new();
    for f in found {
        // Resource methods and constructors (`[method]r.m`, `[constructor]r`) take a resource.
        let unsupported = if f.name.starts_with('[') {
            Some("a resource's method, constructor or static function".to_string())
        } else if f.func.async_() {
            Some("an async function (component-model async is not supported)".to_string())
        } else {
            f.func
                .params()
                .find_map(|(p, t)| unsupported(&t).map(|why| format!("parameter {p} is {why}")))
                .or_else(|| {
                    f.func
                        .results()
                        .find_map(|t| unsupported(&t).map(|why| format!("its result is {why}")))
                })
        };
        if let Some(reason) = unsupported {
            skipped.push(SkippedFunction {
                export: f.export,
                reason,
            });
            continue;
        }
        offered.push(f);
    }
    // Snake-case names; the interface-prefixed form for every function whose name is shared.
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for f in &offered {
        *counts.entry(snake(&f.name)).or_default() += 1;
    }
    let mut functions: Vec<GenericFunction> = Vec::new();
    for f in offered {
        let base = snake(&f.name);
        let tool = match (&f.iface, counts.get(&base).copied().unwrap_or(0) > 1) {
            (Some(iface), true) => format!("{}_{base}", snake(interface_name(iface))),
            _ => base,
        };
        if let Some(other) = functions.iter().find(|g| g.tool == tool) {
            return Err(GenericError::Collision {
                tool,
                first: other.export.clone(),
                second: f.export,
            });
        }
        let params: Vec<(String, Type)> =
            f.func.params().map(|(n, t)| (n.to_string(), t)).collect();
        let mut props = Map::new();
        for (n, t) in &params {
            props.insert(n.clone(), schema(t));
        }
        let schema = json!({
            "type": "object",
            "properties": props,
            "required": params.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            "additionalProperties": false,
        });
        functions.push(GenericFunction {
            tool,
            export: f.export,
            docs: f.docs,
            schema,
            params,
            index: f.index,
        });
    }
    if functions.is_empty() {
        let skipped = skipped
            .iter()
            .map(|s| format!("; {} skipped: {}", s.export, s.reason))
            .collect::<String>();
        return Err(GenericError::NoFunctions { skipped });
    }
    Ok(GenericExports { functions, skipped })
}

/// `ns:pkg/iface@1.0.0` → `iface`; a plain name stays.
fn interface_name(export: &str) -> &str {
    let s = export.rsplit_once('/').map_or(export, |(_, i)| i);
    s.split_once('@').map_or(s, |(i, _)| i)
}

/// WIT's kebab-case as `snake_case`.
pub fn snake(name: &str) -> String {
    name.replace('-', "_").to_ascii_lowercase()
}

/// Why a value of `t` cannot cross a tool call (a resource, stream, future…), if it cannot.
fn unsupported(t: &Type) -> Option<String> {
    match t {
        Type::Own(_) | Type::Borrow(_) => Some("a resource".into()),
        Type::Future(_) => Some("a future".into()),
        Type::Stream(_) => Some("a stream".into()),
        Type::ErrorContext => Some("an error-context".into()),
        Type::Map(m) => unsupported(&m.key()).or_else(|| unsupported(&m.value())),
        Type::FixedLengthList(l) => unsupported(&l.ty()),
        Type::List(l) => unsupported(&l.ty()),
        Type::Option(o) => unsupported(&o.ty()),
        Type::Record(r) => r.fields().find_map(|f| unsupported(&f.ty)),
        Type::Tuple(t) => t.types().find_map(|t| unsupported(&t)),
        Type::Variant(v) => v.cases().find_map(|c| c.ty.as_ref().and_then(unsupported)),
        Type::Result(r) => r
            .ok()
            .as_ref()
            .and_then(unsupported)
            .or_else(|| r.err().as_ref().and_then(unsupported)),
        _ => None,
    }
}

/// The JSON Schema of a value of `t`.
pub fn schema(t: &Type) -> Value {
    match t {
        Type::Bool => json!({"type": "boolean"}),
        Type::S8 => json!({"type": "integer", "minimum": i8::MIN, "maximum": i8::MAX}),
        Type::U8 => json!({"type": "integer", "minimum": 0, "maximum": u8::MAX}),
        Type::S16 => json!({"type": "integer", "minimum": i16::MIN, "maximum": i16::MAX}),
        Type::U16 => json!({"type": "integer", "minimum": 0, "maximum": u16::MAX}),
        Type::S32 => json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX}),
        Type::U32 => json!({"type": "integer", "minimum": 0, "maximum": u32::MAX}),
        Type::S64 => json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}),
        Type::U64 => json!({"type": "integer", "minimum": 0, "maximum": u64::MAX}),
        Type::Float32 | Type::Float64 => json!({"type": "number"}),
        Type::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
        Type::String => json!({"type": "string"}),
        Type::List(l) => json!({"type": "array", "items": schema(&l.ty())}),
        Type::FixedLengthList(l) => {
            json!({"type": "array", "items": schema(&l.ty()), "minItems": l.len(), "maxItems": l.len()})
        }
        Type::Map(m) => json!({
            "type": "array",
            "description": "The map's entries, each a [key, value] pair; no key twice.",
            "items": {
                "type": "array",
                "prefixItems": [schema(&m.key()), schema(&m.value())],
                "minItems": 2,
                "maxItems": 2,
            },
        }),
        Type::Record(r) => {
            let mut props = Map::new();
            let mut required = Vec::new();
            for f in r.fields() {
                props.insert(f.name.to_string(), schema(&f.ty));
                required.push(f.name.to_string());
            }
            json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
        }
        Type::Tuple(t) => {
            let items: Vec<Value> = t.types().map(|t| schema(&t)).collect();
            let n = items.len();
            json!({"type": "array", "prefixItems": items, "minItems": n, "maxItems": n})
        }
        Type::Variant(v) => {
            let cases: Vec<Value> = v
                .cases()
                .map(|c| {
                    let mut props = Map::new();
                    props.insert("tag".into(), json!({"const": c.name}));
                    let mut required = vec!["tag"];
                    if let Some(t) = &c.ty {
                        props.insert("val".into(), schema(t));
                        required.push("val");
                    }
                    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
                })
                .collect();
            json!({"oneOf": cases})
        }
        Type::Enum(e) => json!({"type": "string", "enum": e.names().collect::<Vec<_>>()}),
        Type::Option(o) => json!({"anyOf": [{"type": "null"}, schema(&o.ty())]}),
        Type::Result(r) => {
            let side = |t: Option<Type>| t.map_or(json!({"type": "null"}), |t| schema(&t));
            json!({"oneOf": [
                {"type": "object", "properties": {"ok": side(r.ok())}, "required": ["ok"], "additionalProperties": false},
                {"type": "object", "properties": {"err": side(r.err())}, "required": ["err"], "additionalProperties": false},
            ]})
        }
        Type::Flags(f) => {
            let mut props = Map::new();
            for n in f.names() {
                props.insert(n.to_string(), json!({"type": "boolean"}));
            }
            json!({"type": "object", "properties": props, "additionalProperties": false})
        }
        // Never offered (see `unsupported`).
        _ => json!({}),
    }
}

/// Why a JSON argument cannot be passed as a WIT value ([`to_val`]): where, and what is wrong.
/// The model reads the message (`<path>: <problem>`) as the call's `invalid-arguments` error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ArgError {
    /// Where in the arguments (`parameter x`, `parameter x.field[2]`).
    pub path: String,
    /// What is wrong there.
    pub problem: ArgProblem,
}

/// What is wrong with one JSON argument value (see [`ArgError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgProblem {
    /// The value is not of the JSON shape the type needs.
    #[error("expected {want}, got {got}")]
    Expected {
        /// What the type needs (`a string`, `an array`, …).
        want: &'static str,
        /// What the value is.
        got: String,
    },
    /// An integer type got something else.
    #[error("expected an integer ({ty}), got {got}")]
    NotInteger {
        /// The WIT integer type.
        ty: &'static str,
        /// What the value is.
        got: String,
    },
    /// An integer outside its type's range.
    #[error("{n} is out of range for {ty} ({min}..={max})")]
    OutOfRange {
        /// The value.
        n: i128,
        /// The WIT integer type.
        ty: &'static str,
        /// Its least value.
        min: i128,
        /// Its greatest value.
        max: i128,
    },
    /// A `char` got a string of another length.
    #[error("expected exactly one character, got {0:?}")]
    NotOneChar(String),
    /// A fixed-length list got another number of items.
    #[error("expected an array of exactly {want} items, got {got}")]
    ListLength {
        /// How many items it needs.
        want: usize,
        /// How many it got.
        got: usize,
    },
    /// A tuple got another number of items.
    #[error("expected an array of {want} items, got {got}")]
    TupleLength {
        /// How many items it needs.
        want: usize,
        /// How many it got.
        got: usize,
    },
    /// A map entry is not a `[key, value]` pair.
    #[error("expected a [key, value] pair, got {0}")]
    NotPair(String),
    /// A map key given twice.
    #[error("the key {0} is already in the map")]
    DuplicateKey(String),
    /// A record lacks a field.
    #[error("missing field {0}")]
    MissingField(String),
    /// A record got a field its type does not have.
    #[error("unknown field {0}")]
    UnknownField(String),
    /// A variant without its `tag`.
    #[error("missing tag")]
    MissingTag,
    /// A variant tag the type does not have.
    #[error("unknown tag {tag:?} (one of: {cases})")]
    UnknownTag {
        /// The tag given.
        tag: String,
        /// The type's cases, comma-separated.
        cases: String,
    },
    /// A variant case with a payload, given without `val`.
    #[error("tag {0} needs a val")]
    NeedsVal(String),
    /// An enum name the type does not have.
    #[error("{name:?} is not one of: {names}")]
    NotOneOf {
        /// The name given.
        name: String,
        /// The type's names, comma-separated.
        names: String,
    },
    /// A result's `ok` or `err` side without its value.
    #[error("missing")]
    Missing,
    /// A flag the type does not have.
    #[error("unknown flag {flag} (flags: {flags})")]
    UnknownFlag {
        /// The flag given.
        flag: String,
        /// The type's flags, comma-separated.
        flags: String,
    },
    /// A type no tool parameter can have.
    #[error("this type cannot be passed to a tool")]
    Unsupported,
}

impl ArgProblem {
    /// This problem at `path`.
    fn at(self, path: &str) -> ArgError {
        ArgError {
            path: path.to_string(),
            problem: self,
        }
    }
}

/// Converts the JSON `v` at `path` (for errors: `parameter x`, `parameter x.field`) to a value of
/// `t`.
pub fn to_val(v: &Value, t: &Type, path: &str) -> Result<Val, ArgError> {
    fn int<N: TryFrom<i128>>(
        v: &Value,
        path: &str,
        ty: &'static str,
        min: i128,
        max: i128,
    ) -> Result<N, ArgError> {
        let n: Option<i128> = v
            .as_i64()
            .map(i128::from)
            .or_else(|| v.as_u64().map(i128::from))
            .or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.is_finite())
                    .map(|f| f as i128)
            });
        let Some(n) = n else {
            return Err(ArgProblem::NotInteger { ty, got: kind(v) }.at(path));
        };
        N::try_from(n)
            .ok()
            .filter(|_| n >= min && n <= max)
            .ok_or_else(|| ArgProblem::OutOfRange { n, ty, min, max }.at(path))
    }
    let want = |want: &'static str| ArgProblem::Expected { want, got: kind(v) }.at(path);
    Ok(match t {
        Type::Bool => Val::Bool(v.as_bool().ok_or_else(|| want("a boolean"))?),
        Type::S8 => Val::S8(int(v, path, "s8", i8::MIN.into(), i8::MAX.into())?),
        Type::U8 => Val::U8(int(v, path, "u8", 0, u8::MAX.into())?),
        Type::S16 => Val::S16(int(v, path, "s16", i16::MIN.into(), i16::MAX.into())?),
        Type::U16 => Val::U16(int(v, path, "u16", 0, u16::MAX.into())?),
        Type::S32 => Val::S32(int(v, path, "s32", i32::MIN.into(), i32::MAX.into())?),
        Type::U32 => Val::U32(int(v, path, "u32", 0, u32::MAX.into())?),
        Type::S64 => Val::S64(int(v, path, "s64", i64::MIN.into(), i64::MAX.into())?),
        Type::U64 => Val::U64(int(v, path, "u64", 0, u64::MAX.into())?),
        Type::Float32 => Val::Float32(v.as_f64().ok_or_else(|| want("a number"))? as f32),
        Type::Float64 => Val::Float64(v.as_f64().ok_or_else(|| want("a number"))?),
        Type::Char => {
            let s = v.as_str().ok_or_else(|| want("a one-character string"))?;
            let mut cs = s.chars();
            match (cs.next(), cs.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(ArgProblem::NotOneChar(s.to_string()).at(path)),
            }
        }
        Type::String => Val::String(v.as_str().ok_or_else(|| want("a string"))?.to_string()),
        Type::List(l) => {
            let items = v.as_array().ok_or_else(|| want("an array"))?;
            let ty = l.ty();
            Val::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| to_val(x, &ty, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::FixedLengthList(l) => {
            let items = v.as_array().ok_or_else(|| want("an array"))?;
            if items.len() != l.len() as usize {
                return Err(ArgProblem::ListLength {
                    want: l.len() as usize,
                    got: items.len(),
                }
                .at(path));
            }
            let ty = l.ty();
            Val::FixedLengthList(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| to_val(x, &ty, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Map(m) => {
            let items = v
                .as_array()
                .ok_or_else(|| want("an array of [key, value] pairs"))?;
            let (kt, vt) = (m.key(), m.value());
            let mut pairs: Vec<(Val, Val)> = Vec::with_capacity(items.len());
            for (i, pair) in items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                let [k, x] = pair.as_array().map(Vec::as_slice).unwrap_or_default() else {
                    return Err(ArgProblem::NotPair(kind(pair)).at(&p));
                };
                let key = to_val(k, &kt, &format!("{p}[0]"))?;
                if pairs.iter().any(|(other, _)| *other == key) {
                    return Err(ArgProblem::DuplicateKey(k.to_string()).at(&p));
                }
                let val = to_val(x, &vt, &format!("{p}[1]"))?;
                pairs.push((key, val));
            }
            Val::Map(pairs)
        }
        Type::Record(r) => {
            let obj = v.as_object().ok_or_else(|| want("an object"))?;
            let mut fields = Vec::new();
            for f in r.fields() {
                let x = obj
                    .get(f.name)
                    .ok_or_else(|| ArgProblem::MissingField(f.name.to_string()).at(path))?;
                fields.push((
                    f.name.to_string(),
                    to_val(x, &f.ty, &format!("{path}.{}", f.name))?,
                ));
            }
            if let Some(k) = obj
                .keys()
                .find(|k| !r.fields().any(|f| f.name == k.as_str()))
            {
                return Err(ArgProblem::UnknownField(k.clone()).at(path));
            }
            Val::Record(fields)
        }
        Type::Tuple(tt) => {
            let items = v.as_array().ok_or_else(|| want("an array"))?;
            if items.len() != tt.types().len() {
                return Err(ArgProblem::TupleLength {
                    want: tt.types().len(),
                    got: items.len(),
                }
                .at(path));
            }
            Val::Tuple(
                items
                    .iter()
                    .zip(tt.types())
                    .enumerate()
                    .map(|(i, (x, t))| to_val(x, &t, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )
        }
        Type::Variant(var) => {
            let obj = v
                .as_object()
                .ok_or_else(|| want("an object {\"tag\", \"val\"}"))?;
            let tag = obj
                .get("tag")
                .and_then(Value::as_str)
                .ok_or_else(|| ArgProblem::MissingTag.at(path))?;
            let case = var.cases().find(|c| c.name == tag).ok_or_else(|| {
                ArgProblem::UnknownTag {
                    tag: tag.to_string(),
                    cases: var.cases().map(|c| c.name).collect::<Vec<_>>().join(", "),
                }
                .at(path)
            })?;
            let payload = match &case.ty {
                Some(t) => {
                    let x = obj
                        .get("val")
                        .ok_or_else(|| ArgProblem::NeedsVal(tag.to_string()).at(path))?;
                    Some(Box::new(to_val(x, t, &format!("{path}.val"))?))
                }
                None => None,
            };
            Val::Variant(tag.to_string(), payload)
        }
        Type::Enum(e) => {
            let s = v.as_str().ok_or_else(|| want("a string"))?;
            if !e.names().any(|n| n == s) {
                return Err(ArgProblem::NotOneOf {
                    name: s.to_string(),
                    names: e.names().collect::<Vec<_>>().join(", "),
                }
                .at(path));
            }
            Val::Enum(s.to_string())
        }
        Type::Option(o) => match v {
            Value::Null => Val::Option(None),
            x => Val::Option(Some(Box::new(to_val(x, &o.ty(), path)?))),
        },
        Type::Result(r) => {
            let obj = v
                .as_object()
                .ok_or_else(|| want("an object {\"ok\"} or {\"err\"}"))?;
            let side = |t: Option<Type>,
                        x: Option<&Value>,
                        p: &str|
             -> Result<Option<Box<Val>>, ArgError> {
                match (t, x) {
                    (Some(t), Some(x)) => Ok(Some(Box::new(to_val(x, &t, p)?))),
                    (Some(_), None) => Err(ArgProblem::Missing.at(p)),
                    (None, _) => Ok(None),
                }
            };
            if obj.contains_key("ok") {
                Val::Result(Ok(side(r.ok(), obj.get("ok"), &format!("{path}.ok"))?))
            } else if obj.contains_key("err") {
                Val::Result(Err(side(r.err(), obj.get("err"), &format!("{path}.err"))?))
            } else {
                return Err(want("an object {\"ok\"} or {\"err\"}"));
            }
        }
        Type::Flags(f) => {
            let obj = v.as_object().ok_or_else(|| want("an object of booleans"))?;
            let mut set = Vec::new();
            for (k, b) in obj {
                if !f.names().any(|n| n == k) {
                    return Err(ArgProblem::UnknownFlag {
                        flag: k.clone(),
                        flags: f.names().collect::<Vec<_>>().join(", "),
                    }
                    .at(path));
                }
                if b.as_bool().ok_or_else(|| {
                    ArgProblem::Expected {
                        want: "a boolean",
                        got: kind(b),
                    }
                    .at(&format!("{path}.{k}"))
                })? {
                    set.push(k.clone());
                }
            }
            Val::Flags(set)
        }
        _ => return Err(ArgProblem::Unsupported.at(path)),
    })
}

fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// The JSON form of `v` (the inverse of [`to_val`]).
pub fn to_json(v: &Val) -> Value {
    match v {
        Val::Bool(b) => json!(b),
        Val::S8(n) => json!(n),
        Val::U8(n) => json!(n),
        Val::S16(n) => json!(n),
        Val::U16(n) => json!(n),
        Val::S32(n) => json!(n),
        Val::U32(n) => json!(n),
        Val::S64(n) => json!(n),
        Val::U64(n) => json!(n),
        Val::Float32(f) => float(f64::from(*f)),
        Val::Float64(f) => float(*f),
        Val::Char(c) => json!(c.to_string()),
        Val::String(s) => json!(s),
        Val::List(l) | Val::Tuple(l) | Val::FixedLengthList(l) => {
            Value::Array(l.iter().map(to_json).collect())
        }
        Val::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
        Val::Variant(tag, val) => match val {
            Some(v) => json!({"tag": tag, "val": to_json(v)}),
            None => json!({"tag": tag}),
        },
        Val::Enum(s) => json!(s),
        Val::Option(o) => o.as_deref().map_or(Value::Null, to_json),
        Val::Result(Ok(v)) => json!({"ok": v.as_deref().map_or(Value::Null, to_json)}),
        Val::Result(Err(v)) => json!({"err": v.as_deref().map_or(Value::Null, to_json)}),
        Val::Flags(names) => {
            Value::Object(names.iter().map(|n| (n.clone(), json!(true))).collect())
        }
        Val::Map(pairs) => Value::Array(
            pairs
                .iter()
                .map(|(k, v)| json!([to_json(k), to_json(v)]))
                .collect(),
        ),
        Val::Resource(_) | Val::Future(_) | Val::Stream(_) | Val::ErrorContext(_) => Value::Null,
    }
}

/// A float as JSON: NaN and the infinities (which JSON lacks) as strings.
fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or_else(|| json!(f.to_string()), Value::Number)
}

/// A call that failed without trapping: the arguments did not fit, or the function returned a
/// `result`'s `err`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenericFailure {
    /// `invalid-arguments`, or `error` for a returned `err`.
    pub kind: &'static str,
    /// What went wrong.
    pub message: String,
}

fn invalid(message: String) -> GenericFailure {
    GenericFailure {
        kind: "invalid-arguments",
        message,
    }
}

impl<T: Send + 'static> GenericPre<T> {
    /// Instantiates into `store` and calls the selected function with the JSON `arguments`: the
    /// JSON of its result (a `result`'s `ok` value; its `err` value is a tool failure).
    pub fn call(
        &self,
        store: &mut Store<T>,
        arguments: &str,
    ) -> wasmtime::Result<Result<String, GenericFailure>> {
        let Some(f) = self.selected.and_then(|i| self.exports.functions.get(i)) else {
            return Ok(Err(invalid(format!(
                "a generic component: name one of its tools ({})",
                self.exports
                    .functions
                    .iter()
                    .map(|f| f.tool.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))));
        };
        let args: Value = match serde_json::from_str(arguments) {
            Ok(v) => v,
            Err(e) => return Ok(Err(invalid(format!("the arguments are not JSON: {e}")))),
        };
        let Some(obj) = args.as_object() else {
            return Ok(Err(invalid(format!(
                "the arguments must be a JSON object, got {}",
                kind(&args)
            ))));
        };
        if let Some(k) = obj.keys().find(|k| !f.params.iter().any(|(n, _)| n == *k)) {
            return Ok(Err(invalid(format!(
                "unknown parameter {k} (parameters: {})",
                f.params
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))));
        }
        let mut params = Vec::with_capacity(f.params.len());
        for (name, ty) in &f.params {
            let Some(v) = obj.get(name) else {
                return Ok(Err(invalid(format!("missing parameter {name}"))));
            };
            match to_val(v, ty, &format!("parameter {name}")) {
                Ok(v) => params.push(v),
                Err(e) => return Ok(Err(invalid(e.to_string()))),
            }
        }
        let instance = self.pre.instantiate(&mut *store)?;
        let Some(func) = instance.get_func(&mut *store, f.index) else {
            return Ok(Err(GenericFailure {
                kind: "io",
                message: format!("the component has no function {}", f.export),
            }));
        };
        let mut results = vec![Val::Bool(false); func.ty(&*store).results().len()];
        func.call(&mut *store, &params, &mut results)?;
        let value = match results.as_slice() {
            [] => Value::Null,
            [Val::Result(Ok(v))] => v.as_deref().map_or(Value::Null, to_json),
            [Val::Result(Err(e))] => {
                let message = match e.as_deref().map(to_json) {
                    Some(Value::String(s)) => s,
                    Some(v) => v.to_string(),
                    None => format!("{} failed", f.export),
                };
                return Ok(Err(GenericFailure {
                    kind: "error",
                    message,
                }));
            }
            [one] => to_json(one),
            many => Value::Array(many.iter().map(to_json).collect()),
        };
        Ok(Ok(value.to_string()))
    }
}

/// The documentation in a component's `package-docs` custom section (`wit-docs-inject`'s format:
/// a version byte, then JSON): of the world's functions and of interfaces' functions.
#[derive(Default)]
struct PackageDocs {
    world_funcs: BTreeMap<String, String>,
    iface_funcs: BTreeMap<(String, String), String>,
}

impl PackageDocs {
    fn read(bytes: &[u8]) -> PackageDocs {
        let mut out = PackageDocs::default();
        let Some(data) = custom_section(bytes, PACKAGE_DOCS_SECTION) else {
            return out;
        };
        // Version 0 and 1 share the layout read here; a leading byte is the version.
        let json = match data.first() {
            Some(b'{') => &data[..],
            Some(_) => &data[1..],
            None => return out,
        };
        let Ok(doc) = serde_json::from_slice::<Value>(json) else {
            return out;
        };
        let funcs = |v: &Value| -> Vec<(String, String)> {
            v.get("funcs")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, d)| {
                            let d = d.as_str().or_else(|| d.get("docs")?.as_str())?;
                            Some((k.clone(), d.to_string()))
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        if let Some(worlds) = doc.get("worlds").and_then(Value::as_object) {
            for w in worlds.values() {
                out.world_funcs.extend(funcs(w));
                if let Some(ifaces) = w.get("interfaces").and_then(Value::as_object) {
                    for (iname, i) in ifaces {
                        for (f, d) in funcs(i) {
                            out.iface_funcs.insert((iname.clone(), f), d);
                        }
                    }
                }
            }
        }
        if let Some(ifaces) = doc.get("interfaces").and_then(Value::as_object) {
            for (iname, i) in ifaces {
                for (f, d) in funcs(i) {
                    out.iface_funcs.insert((iname.clone(), f), d);
                }
            }
        }
        out
    }

    fn world_func(&self, name: &str) -> Option<String> {
        self.world_funcs.get(name).cloned()
    }

    fn interface_func(&self, export: &str, func: &str) -> Option<String> {
        self.iface_funcs
            .get(&(interface_name(export).to_string(), func.to_string()))
            .or_else(|| {
                self.iface_funcs
                    .get(&(export.to_string(), func.to_string()))
            })
            .cloned()
    }
}

/// The payload of the first custom section `name` of a component, if any.
fn custom_section(bytes: &[u8], name: &str) -> Option<Vec<u8>> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let Ok(wasmparser::Payload::CustomSection(c)) = payload
            && c.name() == name
        {
            return Some(c.data().to_vec());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component exporting `count: func(m: map<string, u32>) -> u32` (the number of entries)
    /// and `sum: func(xs: list<u8, 3>) -> u32`, written with wasm-encoder (the example
    /// toolchain's `wit-bindgen` does not take these types in a world yet).
    fn map_and_fixed_list_component() -> Vec<u8> {
        use wasm_encoder::{
            Alias, CanonicalFunctionSection, CanonicalOption, CodeSection, Component,
            ComponentAliasSection, ComponentExportKind, ComponentExportSection,
            ComponentTypeSection, ComponentValType, ConstExpr, ExportKind, ExportSection, Function,
            FunctionSection, GlobalSection, GlobalType, InstanceSection, MemorySection, MemoryType,
            Module, ModuleArg, ModuleSection, PrimitiveValType, TypeSection, ValType,
        };
        let mut m = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([ValType::I32; 2], [ValType::I32]);
        types.ty().function([ValType::I32; 3], [ValType::I32]);
        types.ty().function([ValType::I32; 4], [ValType::I32]);
        m.section(&types);
        let mut funcs = FunctionSection::new();
        funcs.function(0).function(1).function(2);
        m.section(&funcs);
        let mut mems = MemorySection::new();
        mems.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        m.section(&mems);
        let mut globals = GlobalSection::new();
        globals.global(
            GlobalType {
                val_type: ValType::I32,
                mutable: true,
                shared: false,
            },
            &ConstExpr::i32_const(1024),
        );
        m.section(&globals);
        let mut exports = ExportSection::new();
        exports
            .export("count", ExportKind::Func, 0)
            .export("sum", ExportKind::Func, 1)
            .export("realloc", ExportKind::Func, 2)
            .export("memory", ExportKind::Memory, 0);
        m.section(&exports);
        let mut code = CodeSection::new();
        // count(ptr, len) = len
        let mut f = Function::new([]);
        f.instructions().local_get(1).end();
        code.function(&f);
        // sum(a, b, c) = a + b + c
        let mut f = Function::new([]);
        f.instructions()
            .local_get(0)
            .local_get(1)
            .i32_add()
            .local_get(2)
            .i32_add()
            .end();
        code.function(&f);
        // realloc(_, _, _, size): a bump allocator, 8-aligned
        let mut f = Function::new([(1, ValType::I32)]);
        f.instructions()
            .global_get(0)
            .i32_const(7)
            .i32_add()
            .i32_const(-8)
            .i32_and()
            .local_tee(4)
            .local_get(3)
            .i32_add()
            .global_set(0)
            .local_get(4)
            .end();
        code.function(&f);
        m.section(&code);

        let mut c = Component::new();
        c.section(&ModuleSection(&m));
        let mut inst = InstanceSection::new();
        inst.instantiate(0, Vec::<(&str, ModuleArg)>::new());
        c.section(&inst);
        let mut aliases = ComponentAliasSection::new();
        for name in ["count", "sum", "realloc"] {
            aliases.alias(Alias::CoreInstanceExport {
                instance: 0,
                kind: ExportKind::Func,
                name,
            });
        }
        aliases.alias(Alias::CoreInstanceExport {
            instance: 0,
            kind: ExportKind::Memory,
            name: "memory",
        });
        c.section(&aliases);
        let mut ctypes = ComponentTypeSection::new();
        ctypes
            .defined_type()
            .map(PrimitiveValType::String, PrimitiveValType::U32);
        ctypes
            .defined_type()
            .fixed_length_list(PrimitiveValType::U8, 3);
        ctypes
            .function()
            .params([("m", ComponentValType::Type(0))])
            .result(Some(PrimitiveValType::U32.into()));
        ctypes
            .function()
            .params([("xs", ComponentValType::Type(1))])
            .result(Some(PrimitiveValType::U32.into()));
        c.section(&ctypes);
        let mut canon = CanonicalFunctionSection::new();
        canon.lift(
            0,
            2,
            [
                CanonicalOption::UTF8,
                CanonicalOption::Memory(0),
                CanonicalOption::Realloc(2),
            ],
        );
        canon.lift(1, 3, []);
        c.section(&canon);
        let mut exp = ComponentExportSection::new();
        exp.export("count", ComponentExportKind::Func, 0, None);
        exp.export("sum", ComponentExportKind::Func, 1, None);
        c.section(&exp);
        c.finish()
    }

    /// Issue 25 leftover: `map<K, V>` and fixed-length `list<T, N>` are offered (the engine
    /// validates them), mapped to JSON Schema and converted both ways; wrong shapes are refused
    /// naming the parameter.
    #[test]
    fn maps_and_fixed_length_lists_are_offered_and_called() {
        let engine = crate::sandbox::engine::new_engine(64 << 20).unwrap();
        let bytes = map_and_fixed_list_component();
        let component = crate::sandbox::compiler::component(
            &engine,
            &bytes,
            std::time::Duration::from_secs(120),
        )
        .expect("the engine takes the types")
        .0;
        let exports = inspect(&engine, &component, &bytes).unwrap();
        assert!(exports.skipped.is_empty(), "{:?}", exports.skipped);
        let f = |t: &str| exports.functions.iter().find(|f| f.tool == t).unwrap();
        assert_eq!(
            f("count").schema["properties"]["m"],
            json!({
                "type": "array",
                "description": "The map's entries, each a [key, value] pair; no key twice.",
                "items": {
                    "type": "array",
                    "prefixItems": [{"type": "string"}, {"type": "integer", "minimum": 0, "maximum": u32::MAX}],
                    "minItems": 2,
                    "maxItems": 2,
                },
            })
        );
        assert_eq!(
            f("sum").schema["properties"]["xs"],
            json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}, "minItems": 3, "maxItems": 3})
        );
        let linker = wasmtime::component::Linker::<()>::new(&engine);
        let pre = linker.instantiate_pre(&component).unwrap();
        let exports = std::sync::Arc::new(exports);
        let call = |tool: &str, args: &str| {
            let i = exports
                .functions
                .iter()
                .position(|f| f.tool == tool)
                .unwrap();
            let g = GenericPre {
                pre: pre.clone(),
                exports: exports.clone(),
                selected: Some(i),
            };
            let mut store = Store::new(&engine, ());
            store.set_epoch_deadline(1 << 40);
            g.call(&mut store, args).unwrap()
        };
        assert_eq!(
            call("count", r#"{"m": [["a", 1], ["b", 2], ["c", 3]]}"#),
            Ok("3".into())
        );
        assert_eq!(call("count", r#"{"m": []}"#), Ok("0".into()));
        assert_eq!(call("sum", r#"{"xs": [1, 2, 3]}"#), Ok("6".into()));
        let refused = |tool: &str, args: &str| match call(tool, args) {
            Err(e) if e.kind == "invalid-arguments" => e.message,
            other => panic!("{args}: {other:?}"),
        };
        let e = refused("sum", r#"{"xs": [1, 2]}"#);
        assert!(
            e.contains("parameter xs") && e.contains("exactly 3 items"),
            "{e}"
        );
        let e = refused("sum", r#"{"xs": [1, 2, 256]}"#);
        assert!(e.contains("parameter xs[2]"), "{e}");
        let e = refused("count", r#"{"m": [["a", 1], ["a", 2]]}"#);
        assert!(
            e.contains("parameter m[1]") && e.contains("already in the map"),
            "{e}"
        );
        let e = refused("count", r#"{"m": {"a": 1}}"#);
        assert!(e.contains("[key, value] pairs"), "{e}");
        let e = refused("count", r#"{"m": [["a"]]}"#);
        assert!(e.contains("parameter m[0]"), "{e}");
        // A map result comes back as its pairs.
        assert_eq!(
            to_json(&Val::Map(vec![(Val::String("k".into()), Val::U32(1))])),
            json!([["k", 1]])
        );
    }

    #[test]
    fn names_are_snake_case_and_interfaces_short() {
        assert_eq!(snake("read-file"), "read_file");
        assert_eq!(interface_name("wasi:http/handler@0.2.0"), "handler");
        assert_eq!(interface_name("calc"), "calc");
    }
}
