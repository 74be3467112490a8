//! `oprof report --pprof OUT.pb.gz`: the profile in Google's pprof format (`profile.proto`,
//! vendored as `crates/oprof/proto/profile.proto` from Debian's golang-github-google-pprof-dev),
//! read by `go tool pprof`, Grafana Pyroscope and Parca; gzip-compressed as the format asks.
//!
//! - Sample types, per counter that sampled: `EVENT_samples` (unit `count`) and, when its
//!   period is known, `EVENT` (unit `events`: samples × period). The first counter's samples
//!   are the default.
//! - One sample per distinct (counter, call chain, CPU, task): `location_id` leaf first, the
//!   sampled address then each return address; string labels `cpu`, `pid` (the task's tgid) and `tid`
//!   where the stream gave them.
//! - Locations: the address (kernel: the PC or return address; user: the ELF virtual address,
//!   else the file offset), the function and, with DWARF, the source line (innermost position
//!   only: no inlined frames). Frames are named as the report names them (see
//!   [`crate::resolve::symbols::SymbolTable::frame_address`]).
//! - Functions: `(image, symbol)` as in `oprof report -l`; mappings: one per image, its host
//!   file (else its name), the file offset of its lowest address and its GNU build id.

use crate::aggregate::Aggregated;
use crate::input::session::Counter;
use crate::resolve::{Resolver, Source, Space};
use anyhow::{Context, Result};
use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;

/// `perftools.profiles.Profile` (fields this tool writes; tags as in profile.proto).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// The string table being built (index 0 is "").
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    ids: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if self.table.is_empty() {
            self.table.push(String::new());
            self.ids.insert(String::new(), 0);
        }
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }
}

/// What the profile says about the recording.
#[derive(Debug, Default, Clone)]
pub struct Meta {
    /// Free text (the session line).
    pub comment: Option<String>,
    pub duration_ns: u64,
}

/// The GNU build id of an ELF file, as lowercase hex.
fn build_id(path: &Path) -> Option<String> {
    crate::input::session::Ids::read(path)?.build_id
}

/// Builds the profile of `agg` (counted with [`crate::aggregate::Options::task`]), resolving
/// with `res` as the report does; `counters` names the counters.
pub fn build(agg: &Aggregated, res: &mut Resolver, counters: &[Counter], meta: &Meta) -> Profile {
    let mut st = Strings::default();
    st.id("");
    // Counters that sampled, and each one's first value column.
    let events: BTreeSet<u64> = agg
        .parts
        .iter()
        .flat_map(|c| c.keys.keys().map(|k| c.key(k).event))
        .collect();
    let mut sample_type = Vec::new();
    let mut column: HashMap<u64, (usize, Option<u64>)> = HashMap::new();
    for &e in &events {
        let c = counters.iter().find(|c| c.counter == e);
        let name = c.map_or_else(|| format!("counter{e}"), |c| c.event.replace(' ', "_"));
        let period = c.and_then(|c| c.count).filter(|&n| n > 0);
        column.insert(e, (sample_type.len(), period));
        sample_type.push(ValueType {
            r#type: st.id(&format!("{name}_samples")),
            unit: st.id("count"),
        });
        if period.is_some() {
            sample_type.push(ValueType {
                r#type: st.id(&name),
                unit: st.id("events"),
            });
        }
    }
    let (period_type, period) = match events.iter().next().and_then(|e| column.get(e)) {
        Some(&(i, Some(p))) => (sample_type.get(i + 1).cloned(), p as i64),
        _ => (None, 0),
    };
    let mut p = Profile {
        default_sample_type: sample_type.first().map_or(0, |t| t.r#type),
        sample_type,
        duration_nanos: meta.duration_ns as i64,
        period_type,
        period,
        ..Profile::default()
    };
    if let Some(c) = &meta.comment {
        p.comment.push(st.id(c));
    }
    // image id → (mapping index, lowest address, its file offset)
    let mut mappings: HashMap<usize, usize> = HashMap::new();
    let mut functions: HashMap<usize, u64> = HashMap::new();
    let mut locations: HashMap<(Space, u64, bool), u64> = HashMap::new();
    // (location ids, label values) → one value per sample type.
    type SampleKey = (Vec<u64>, Option<[Option<u64>; 3]>);
    let mut samples: HashMap<SampleKey, Vec<i64>> = HashMap::new();
    let ncols = p.sample_type.len();
    for counts in &agg.parts {
        for (k, &n) in &counts.keys {
            let key = counts.key(k);
            let mut ids = Vec::new();
            for (i, (space, word)) in key.entries().enumerate() {
                let space = counts.spaces[space as usize];
                let ret = i > 0;
                let id = match locations.get(&(space, word, ret)) {
                    Some(&id) => id,
                    None => {
                        let l = res.resolve(space, word, ret);
                        let (sym, source) = (res.locs[l].sym, res.locs[l].source.clone());
                        let image = res.symbols[sym].0;
                        let address = match space {
                            Space::User {
                                cookie: Some(c), ..
                            } if c != 0 => res.user_vaddr(c, word).unwrap_or(word),
                            _ => word,
                        };
                        let mi = *mappings.entry(image).or_insert_with(|| {
                            let info = &res.images[image];
                            let file = info
                                .host_path
                                .as_ref()
                                .map_or(info.name.clone(), |h| h.display().to_string());
                            let bid = info
                                .host_path
                                .as_deref()
                                .and_then(build_id)
                                .unwrap_or_default();
                            p.mapping.push(Mapping {
                                id: p.mapping.len() as u64 + 1,
                                memory_start: u64::MAX,
                                filename: st.id(&file),
                                build_id: st.id(&bid),
                                has_functions: true,
                                has_filenames: matches!(source, Some(Source::Line(_))),
                                has_line_numbers: matches!(source, Some(Source::Line(_))),
                                ..Mapping::default()
                            });
                            p.mapping.len() - 1
                        });
                        let m = &mut p.mapping[mi];
                        if address < m.memory_start {
                            m.memory_start = address;
                            if let Space::User {
                                cookie: Some(c), ..
                            } = space
                            {
                                m.file_offset = if c != 0 { word } else { 0 };
                            }
                        }
                        m.memory_limit = m.memory_limit.max(address.saturating_add(1));
                        let line = match &source {
                            Some(Source::Line(sl)) => {
                                m.has_line_numbers = true;
                                m.has_filenames = true;
                                Some(sl.clone())
                            }
                            _ => None,
                        };
                        let fid = *functions.entry(sym).or_insert_with(|| {
                            // Placeholders ("(no symbols)", ...) are per image, as report rows.
                            let (img, sname) = &res.symbols[sym];
                            let name = if sname.starts_with('(') {
                                st.id(&format!("{sname} {}", res.images[*img].name))
                            } else {
                                st.id(sname)
                            };
                            let filename = line.as_ref().map_or(0, |l| st.id(&l.file));
                            p.function.push(Function {
                                id: p.function.len() as u64 + 1,
                                name,
                                system_name: name,
                                filename,
                            });
                            p.function.len() as u64
                        });
                        let id = p.location.len() as u64 + 1;
                        p.location.push(Location {
                            id,
                            mapping_id: mi as u64 + 1,
                            address,
                            line: vec![Line {
                                function_id: fid,
                                line: line.and_then(|l| l.line).map_or(0, i64::from),
                            }],
                        });
                        locations.insert((space, word, ret), id);
                        id
                    }
                };
                ids.push(id);
            }
            let values = samples
                .entry((ids, key.task))
                .or_insert_with(|| vec![0; ncols]);
            if let Some(&(i, period)) = column.get(&key.event) {
                values[i] += n as i64;
                if let Some(per) = period {
                    values[i + 1] += (n as i64).saturating_mul(per as i64);
                }
            }
        }
    }
    let (cpu, pid, tid) = (st.id("cpu"), st.id("pid"), st.id("tid"));
    let mut sorted: Vec<_> = samples.into_iter().collect();
    sorted.sort();
    for ((location_id, task), value) in sorted {
        let mut label = Vec::new();
        if let Some(t) = task {
            for (key, v) in [cpu, pid, tid].into_iter().zip(t) {
                // String labels: pprof drops a numeric label of 0 without a unit (cpu 0), and
                // Pyroscope keeps string labels only.
                if let Some(v) = v {
                    label.push(Label {
                        key,
                        str: st.id(&v.to_string()),
                        ..Label::default()
                    });
                }
            }
        }
        p.sample.push(Sample {
            location_id,
            value,
            label,
        });
    }
    for m in &mut p.mapping {
        if m.memory_start == u64::MAX {
            m.memory_start = 0;
        }
    }
    p.string_table = st.table;
    p
}

/// Writes `p` gzip-compressed to `path` (errors name it).
pub fn write_file(p: &Profile, path: &Path) -> Result<()> {
    use prost::Message;
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut gz =
        flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::default());
    gz.write_all(&p.encode_to_vec())
        .and_then(|()| gz.finish()?.flush())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    /// Fields of messages: (message, field name) → (tag, type, repeated).
    type Fields = BTreeMap<(String, String), (u32, String, bool)>;

    /// The fields of `profile.proto`'s messages (`[repeated] TYPE NAME = TAG;` lines).
    fn proto_fields(text: &str) -> Fields {
        let mut out = Fields::new();
        let mut message = None;
        for line in text
            .lines()
            .map(|l| l.split("//").next().unwrap_or("").trim())
        {
            if let Some(m) = line.strip_prefix("message ") {
                message = Some(m.trim_end_matches(" {").to_string());
            } else if line == "}" {
                message = None;
            } else if let (Some(m), Some((decl, tag))) = (&message, line.split_once(" = ")) {
                let words: Vec<&str> = decl.split_whitespace().collect();
                let (repeated, ty, name) = match words[..] {
                    ["repeated", ty, name] => (true, ty, name),
                    [ty, name] => (false, ty, name),
                    _ => panic!("profile.proto: {line}"),
                };
                let tag = tag.trim_end_matches(';').trim().parse().expect(line);
                out.insert((m.clone(), name.into()), (tag, ty.into(), repeated));
            }
        }
        out
    }

    /// The fields of this file's prost structs: their `#[prost(KIND[, repeated|optional], tag
    /// = "N")]` attributes, KIND a message's name for `message` fields (from the Rust type).
    fn prost_fields(src: &str) -> Fields {
        let mut out = Fields::new();
        let (mut message, mut attr) = (None, None);
        for line in src.lines().map(str::trim) {
            if let Some(m) = line.strip_prefix("pub struct ") {
                message = Some(m.trim_end_matches(" {").to_string());
            } else if let Some(a) = line.strip_prefix("#[prost(") {
                attr = Some(a.trim_end_matches(")]").to_string());
            } else if let (Some(m), Some(a)) = (&message, attr.take()) {
                let (name, ty) = line.strip_prefix("pub ").unwrap().split_once(": ").unwrap();
                let parts: Vec<&str> = a.split(", ").collect();
                let tag = parts.last().unwrap();
                let tag = tag.trim_start_matches("tag = \"").trim_end_matches('"');
                let kind = match parts[0] {
                    "message" => ty
                        .trim_end_matches(',')
                        .trim_start_matches("Vec<")
                        .trim_start_matches("Option<")
                        .trim_end_matches('>'),
                    k => k,
                };
                out.insert(
                    (m.clone(), name.trim_start_matches("r#").into()),
                    (
                        tag.parse().unwrap(),
                        kind.into(),
                        parts.contains(&"repeated"),
                    ),
                );
            }
        }
        out
    }

    /// The structs follow the vendored profile.proto: every field's tag, type and repetition;
    /// the proto's fields this tool does not write are exactly these.
    #[test]
    fn structs_match_profile_proto() {
        let proto = proto_fields(include_str!("../../proto/profile.proto"));
        let ours = prost_fields(include_str!("pprof.rs"));
        assert_eq!(ours.len(), 40, "{ours:#?}");
        for (key, field) in &ours {
            assert_eq!(proto.get(key), Some(field), "{key:?}");
        }
        let unwritten: Vec<String> = proto
            .keys()
            .filter(|k| !ours.contains_key(*k))
            .map(|(m, f)| format!("{m}.{f}"))
            .collect();
        let want = [
            "Function.start_line",
            "Location.is_folded",
            "Profile.drop_frames",
            "Profile.keep_frames",
            "Profile.time_nanos",
        ];
        assert_eq!(unwritten, want);
    }
}
