//! The systemd user unit (`~/.config/systemd/user/jucode-daemon.service`).

use crate::{ServiceError, ServiceSpec};

/// The unit's file name.
pub const UNIT_NAME: &str = "jucode-daemon.service";

/// The unit's text. Values are quoted for systemd: `%` would start a specifier and `$` a
/// variable in `ExecStart`, so both are doubled; a line break cannot be written at all.
pub fn unit(spec: &ServiceSpec) -> Result<String, ServiceError> {
    let mut exec = Vec::new();
    for arg in spec.command()? {
        exec.push(quote(&arg, true)?);
    }
    let path = quote(&format!("PATH={}", spec.path_var()?), false)?;
    Ok(format!(
        "# Written by `jucode-daemon install`; `jucode-daemon uninstall` removes it.\n\
         [Unit]\n\
         Description=jucode daemon: hosts coding-agent sessions\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={exec}\n\
         Environment={path}\n\
         Restart=always\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec = exec.join(" "),
    ))
}

/// One value in double quotes, escaped for a unit file (`exec`: also for `ExecStart`).
fn quote(value: &str, exec: bool) -> Result<String, ServiceError> {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\n' | '\r' | '\0' => return Err(ServiceError::Unwritable(value.to_string())),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' if exec => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn odd_characters_are_escaped_and_line_breaks_refused() {
        assert_eq!(
            quote("/a b/100%/$HOME", true).unwrap(),
            r#""/a b/100%%/$$HOME""#
        );
        assert_eq!(quote(r#"x"y\z$"#, false).unwrap(), r#""x\"y\\z$""#);
        assert!(quote("a\nExecStartPre=/bin/evil", true).is_err());
    }
}
