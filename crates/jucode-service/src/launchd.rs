//! The launchd agent (`~/Library/LaunchAgents/cn.jucode.daemon.plist`).

use crate::{ServiceError, ServiceSpec};

/// The agent's label, which is also its file's name.
pub const LABEL: &str = "cn.jucode.daemon";

/// The agent's property list (XML). Started at login (`RunAtLoad`) and again whenever it
/// exits (`KeepAlive`).
pub fn plist(spec: &ServiceSpec) -> Result<Vec<u8>, ServiceError> {
    let mut env = plist::Dictionary::new();
    env.insert("PATH".into(), spec.path_var()?.into());
    let mut dict = plist::Dictionary::new();
    dict.insert("Label".into(), LABEL.into());
    dict.insert(
        "ProgramArguments".into(),
        plist::Value::Array(spec.command()?.into_iter().map(Into::into).collect()),
    );
    dict.insert("EnvironmentVariables".into(), plist::Value::Dictionary(env));
    dict.insert("RunAtLoad".into(), true.into());
    dict.insert("KeepAlive".into(), true.into());
    dict.insert("ProcessType".into(), "Background".into());
    let mut out = Vec::new();
    plist::Value::Dictionary(dict)
        .to_writer_xml(&mut out)
        .map_err(|e| ServiceError::Plist(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_parses_back_with_the_command_path_and_keep_alive() {
        let spec = ServiceSpec {
            exe: "/Applications/Ju Code.app/bin/jucode-daemon".into(),
            args: vec!["--listen".into(), "127.0.0.1:7788".into()],
            path: "/opt/homebrew/bin:/usr/bin:/bin".into(),
            log_file: "/Users/u/.jucode/daemon/daemon.log".into(),
        };
        let xml = plist(&spec).unwrap();
        let value = plist::Value::from_reader_xml(xml.as_slice()).unwrap();
        let dict = value.as_dictionary().unwrap();
        assert_eq!(dict["Label"].as_string(), Some(LABEL));
        let args: Vec<&str> = dict["ProgramArguments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_string().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "/Applications/Ju Code.app/bin/jucode-daemon",
                "--listen",
                "127.0.0.1:7788",
                "--log-file",
                "/Users/u/.jucode/daemon/daemon.log"
            ]
        );
        let env = dict["EnvironmentVariables"].as_dictionary().unwrap();
        assert_eq!(
            env["PATH"].as_string(),
            Some("/opt/homebrew/bin:/usr/bin:/bin")
        );
        assert_eq!(dict["RunAtLoad"].as_boolean(), Some(true));
        assert_eq!(dict["KeepAlive"].as_boolean(), Some(true));
    }

    #[test]
    fn a_path_that_is_not_utf8_is_refused() {
        use std::os::unix::ffi::OsStringExt;
        let spec = ServiceSpec {
            exe: "/bin/jucode-daemon".into(),
            args: vec![],
            path: std::ffi::OsString::from_vec(vec![b'/', 0xff]),
            log_file: "/tmp/daemon.log".into(),
        };
        assert!(matches!(plist(&spec), Err(ServiceError::NotUtf8(_))));
    }
}
