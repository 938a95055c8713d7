//! `hook_read_project`: a test hook that tries to read `secret.txt` in the project without a
//! grant. It denies with what happened: the read fails (no directory is mounted), so its reason
//! says so; were it to succeed, the reason would carry the bytes it read.

use hook_common::Decision;

fn decide(event: String) -> Decision {
    let project = event
        .split("\"project\":\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or("/")
        .to_string();
    let mut tried = Vec::new();
    for p in [format!("{project}/secret.txt"), "/secret.txt".to_string(), "secret.txt".to_string()] {
        match std::fs::read_to_string(&p) {
            Ok(text) => return Decision::Deny(format!("read {p}: {text}")),
            Err(e) => tried.push(format!("{p}: {e}")),
        }
    }
    Decision::Deny(format!("could not read the project: {}", tried.join("; ")))
}

hook_common::hook!(decide);
