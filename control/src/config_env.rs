//! Configuration keys from environment variables, for containers: `IWARPD_<SECTION>__<KEY>=value`
//! sets `<section>.<key>` (names lower-cased, `__` between levels) on top of the file, e.g.
//! `IWARPD_PORT__IP=10.0.0.1/24`, `IWARPD_TCP__RTO_MIN_MS=50`, `IWARPD_DATAPLANE__CORES=[1]`.
//!
//! A value is read as a TOML value when it is one (`20`, `true`, `[0, 1]`, `"quoted"`) and as a
//! bare string otherwise (`10.0.0.1/24`, `info`); a number or boolean given for a string key is
//! taken as its text; an empty variable leaves its key unset (`""` is the empty string, so a
//! compose file can switch a key off with `${VAR-default}`). The merged configuration goes through the same checks as a file, and an
//! error about a key set this way names the variable as well as the key and the allowed values.
//! Without any `IWARPD_*` variable, loading is exactly `Config::parse` of the file.

use crate::config::{Config, ConfigError};
use std::ffi::OsString;
use std::path::Path;

/// Prefix of the variables that set configuration keys.
pub const PREFIX: &str = "IWARPD_";

/// One `IWARPD_*` variable mapped onto a key.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvOverride {
    /// The variable, e.g. `IWARPD_PORT__MTU`.
    pub var: String,
    /// The dotted key it sets, e.g. `port.mtu`.
    pub key: String,
    /// The variable's text.
    pub raw: String,
    /// The value put into the configuration.
    pub value: toml::Value,
}

/// The overrides among `vars` (other variables are ignored), sorted by variable name.
pub fn overrides<I>(vars: I) -> Result<Vec<EnvOverride>, ConfigError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut out = Vec::new();
    for (name, val) in vars {
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let raw = val
            .into_string()
            .map_err(|_| env_error(name, "the value is not valid UTF-8".into()))?;
        let parts: Vec<&str> = rest.split("__").collect();
        let part_ok = |p: &&str| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !p.starts_with('_')
                && !p.ends_with('_')
        };
        if parts.len() < 2 || !parts.iter().all(part_ok) {
            return Err(env_error(
                name,
                format!(
                    "not a configuration key: expected {PREFIX}<SECTION>__<KEY>, \
                     e.g. {PREFIX}PORT__IP=10.0.0.1/24 for `port.ip`"
                ),
            ));
        }
        if raw.is_empty() {
            continue; // set but empty: the key keeps its default (use `""` for an empty string)
        }
        let key = parts
            .iter()
            .map(|p| p.to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(".");
        out.push(EnvOverride {
            var: name.to_owned(),
            key,
            value: parse_value(&raw),
            raw,
        });
    }
    out.sort_by(|a, b| a.var.cmp(&b.var));
    Ok(out)
}

/// Read `path`, apply the `IWARPD_*` variables among `vars`, and validate.
pub fn load<I>(path: &Path, vars: I) -> Result<Config, ConfigError>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError::Io {
        path: p.clone(),
        err,
    })?;
    parse(&text, &p, &overrides(vars)?)
}

/// Parse TOML `text` (`path` is used in messages), apply `ovs`, and validate.
pub fn parse(text: &str, path: &str, ovs: &[EnvOverride]) -> Result<Config, ConfigError> {
    if ovs.is_empty() {
        return Config::parse(text, path);
    }
    let mut table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.into(),
        msg: e.to_string(),
    })?;
    for o in ovs {
        set(&mut table, o, o.value.clone())?;
    }
    let mut retried = vec![false; ovs.len()];
    let cfg = loop {
        let err = match toml::Value::Table(table.clone()).try_into::<Config>() {
            Ok(c) => break c,
            Err(e) => e.to_string(),
        };
        let (key, msg) = split_error(&err);
        let set_by = |o: &EnvOverride| o.key == key || o.key.starts_with(&format!("{key}."));
        let Some(i) = ovs.iter().position(set_by) else {
            return Err(ConfigError::Parse {
                path: path.into(),
                msg: format!("key `{key}`: {msg}"),
            });
        };
        let o = &ovs[i];
        // A number or boolean given for a string key: the variable's text is meant.
        if !retried[i] && o.key == key && !o.value.is_str() && msg.contains("expected a string") {
            retried[i] = true;
            set(&mut table, o, toml::Value::String(o.raw.clone()))?;
            continue;
        }
        return Err(ConfigError::Parse {
            path: format!("environment variable {}", o.var),
            msg: format!("key `{key}`: {msg}"),
        });
    };
    cfg.validate(path).map_err(|e| match e {
        ConfigError::Value { key, msg, .. } if ovs.iter().any(|o| o.key == key) => {
            let var = &ovs.iter().find(|o| o.key == key).expect("found").var;
            ConfigError::Value {
                path: format!("environment variable {var}"),
                key,
                msg,
            }
        }
        e => e,
    })?;
    Ok(cfg)
}

/// `v = <raw>` parsed as TOML gives the value; anything else is the raw text.
fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) if t.len() == 1 => t.remove("v").unwrap_or_else(|| raw.into()),
        _ => toml::Value::String(raw.to_owned()),
    }
}

/// Put `value` at `o.key`, creating the tables on the way.
fn set(table: &mut toml::Table, o: &EnvOverride, value: toml::Value) -> Result<(), ConfigError> {
    let parts: Vec<&str> = o.key.split('.').collect();
    let (last, sections) = parts.split_last().expect("at least two parts");
    let mut t = table;
    for (n, s) in sections.iter().enumerate() {
        let entry = t
            .entry((*s).to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry.as_table_mut().ok_or_else(|| {
            env_error(
                &o.var,
                format!(
                    "key `{}` is not a table in the file, so `{}` cannot be set",
                    parts[..=n].join("."),
                    o.key
                ),
            )
        })?;
    }
    t.insert((*last).to_owned(), value);
    Ok(())
}

/// The dotted key and the message of a `toml` deserialisation error ("... \nin `a.b`\n").
fn split_error(err: &str) -> (String, String) {
    let err = err.trim_end();
    let (msg, at) = match err.rsplit_once("\nin `") {
        Some((m, rest)) => (m.trim(), rest.trim_end_matches('`')),
        None => (err, ""),
    };
    let field = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|p| msg.strip_prefix(p))
        .and_then(|r| r.split_once('`'))
        .map(|(f, _)| f);
    let key = match (at, field) {
        ("", Some(f)) => f.to_owned(),
        (at, Some(f)) => format!("{at}.{f}"),
        (at, None) => at.to_owned(),
    };
    (key, msg.to_owned())
}

fn env_error(var: &str, msg: String) -> ConfigError {
    ConfigError::Parse {
        path: format!("environment variable {var}"),
        msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "[port]\ndevice = \"net_memif0,role=server\"\nip = \"10.0.0.1/24\"\n";

    fn vars(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    fn with_env(text: &str, v: &[(&str, &str)]) -> Result<Config, String> {
        let ovs = overrides(vars(v)).map_err(|e| e.to_string())?;
        parse(text, "t.toml", &ovs).map_err(|e| e.to_string())
    }

    #[test]
    fn variables_set_keys_of_every_type() {
        let c = with_env(
            FILE,
            &[
                ("IWARPD_PORT__IP", "10.9.0.2/16"),
                ("IWARPD_PORT__MTU", "9000"),
                ("IWARPD_PORT__PROMISCUOUS", "true"),
                ("IWARPD_DATAPLANE__CORES", "[0]"),
                ("IWARPD_TCP__CC", "newreno"),
                ("IWARPD_EAL__EXTRA_ARGS", "[\"--log-level=8\"]"),
                ("IWARPD_DIAG__SEND_TO", "10.9.0.1:9"),
                ("IWARPD_LOG__LEVEL", "\"debug\""),
                ("PATH", "/usr/bin"),
                ("IWARP_TAKEOVER", "eth0"),
            ],
        )
        .unwrap();
        assert_eq!(c.port.ip, "10.9.0.2/16");
        assert_eq!(c.port.device, "net_memif0,role=server");
        assert_eq!(c.port.mtu, 9000);
        assert!(c.port.promiscuous);
        assert_eq!(c.dataplane.cores, vec![0]);
        assert_eq!(c.tcp.cc, "newreno");
        assert_eq!(c.eal.extra_args, vec!["--log-level=8".to_owned()]);
        assert_eq!(c.diag.send_to.as_deref(), Some("10.9.0.1:9"));
        assert_eq!(c.log.level, "debug");
    }

    #[test]
    fn a_whole_config_from_the_environment() {
        let c = with_env(
            "",
            &[
                ("IWARPD_PORT__DEVICE", "net_af_packet0,iface=eth0"),
                ("IWARPD_PORT__IP", "10.78.0.11/24"),
            ],
        )
        .unwrap();
        assert_eq!(c.port_name(), "net_af_packet0");
        assert_eq!(c.stats.interval_ms, 1000);
    }

    #[test]
    fn a_number_for_a_string_key_is_its_text() {
        let c = with_env(FILE, &[("IWARPD_EAL__FILE_PREFIX", "123")]).unwrap();
        assert_eq!(c.eal.file_prefix.as_deref(), Some("123"));
        // ... and then checked like any string.
        let e = with_env(FILE, &[("IWARPD_LOG__LEVEL", "1")]).unwrap_err();
        assert!(
            e.contains("IWARPD_LOG__LEVEL") && e.contains("log.level"),
            "{e}"
        );
        assert!(e.contains("\"1\" is not allowed"), "{e}");
    }

    #[test]
    fn errors_name_the_variable_the_key_and_the_allowed_values() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
        let cases: &[Case] = &[
            (
                &[("IWARPD_PORT__MTU", "100")],
                &["IWARPD_PORT__MTU", "port.mtu", "576..=9000"],
            ),
            (
                &[("IWARPD_PORT__MTU", "big")],
                &["IWARPD_PORT__MTU", "port.mtu", "expected u16"],
            ),
            (
                &[("IWARPD_PORT__SPEED", "4")],
                &[
                    "IWARPD_PORT__SPEED",
                    "port.speed",
                    "expected one of",
                    "`mtu`",
                ],
            ),
            (
                &[("IWARPD_BOGUS__X", "1")],
                &["IWARPD_BOGUS__X", "bogus", "expected one of"],
            ),
            (
                &[("IWARPD_DATAPLANE__MODE", "turbo")],
                &[
                    "IWARPD_DATAPLANE__MODE",
                    "dataplane.mode",
                    "\"stack\" or \"echo\"",
                ],
            ),
            (
                &[("IWARPD_EAL__HUGEPAGES", "maybe")],
                &["IWARPD_EAL__HUGEPAGES", "eal.hugepages", "auto"],
            ),
            (
                &[("IWARPD_PORTIP", "10.0.0.1/24")],
                &["IWARPD_PORTIP", "IWARPD_<SECTION>__<KEY>"],
            ),
            (
                &[("IWARPD_PORT__", "x")],
                &["IWARPD_PORT__", "IWARPD_<SECTION>__<KEY>"],
            ),
            (
                &[("IWARPD_PORT__IP__X", "1")],
                &["IWARPD_PORT__IP__X", "`port.ip` is not a table"],
            ),
        ];
        for (v, want) in cases {
            let e = with_env(FILE, v).unwrap_err();
            for w in *want {
                assert!(e.contains(w), "{v:?}: want {w:?} in: {e}");
            }
        }
    }

    #[test]
    fn file_errors_stay_the_files() {
        // A bad key in the file is not blamed on an unrelated variable.
        let text = format!("{FILE}mtu = 20000\n");
        let e = with_env(&text, &[("IWARPD_PORT__IP", "10.0.0.2/24")]).unwrap_err();
        assert!(e.contains("t.toml") && e.contains("port.mtu"), "{e}");
        assert!(!e.contains("IWARPD_"), "{e}");
        // A missing required key names it.
        let e = with_env("", &[("IWARPD_PORT__IP", "10.0.0.2/24")]).unwrap_err();
        assert!(e.contains("port.device") && e.contains("missing"), "{e}");
    }

    #[test]
    fn without_variables_loading_is_the_files() {
        let e = with_env(&format!("{FILE}bogus = 1\n"), &[("HOME", "/")]).unwrap_err();
        let plain = Config::parse(&format!("{FILE}bogus = 1\n"), "t.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(e, plain);
    }

    #[test]
    fn an_empty_variable_leaves_the_key_unset() {
        let c = with_env(
            FILE,
            &[
                ("IWARPD_DIAG__PING", ""),
                ("IWARPD_EAL__FILE_PREFIX", "\"\""),
            ],
        )
        .unwrap();
        assert_eq!(c.diag.ping, None);
        assert_eq!(c.eal.file_prefix.as_deref(), Some(""));
        let e = with_env(FILE, &[("IWARPD_NO_KEY", "")]).unwrap_err();
        assert!(e.contains("IWARPD_NO_KEY"), "{e}");
    }

    #[test]
    fn values_parse_as_toml_or_text() {
        assert_eq!(parse_value("20"), toml::Value::Integer(20));
        assert_eq!(parse_value("false"), toml::Value::Boolean(false));
        assert_eq!(parse_value("10.0.0.1/24"), "10.0.0.1/24".into());
        assert_eq!(parse_value("10.0.0.1:9"), "10.0.0.1:9".into());
        assert_eq!(parse_value(""), "".into());
        assert_eq!(parse_value("1\nx = 2"), "1\nx = 2".into());
        assert_eq!(parse_value("\"a b\""), "a b".into());
    }
}
