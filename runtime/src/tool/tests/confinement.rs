//! Workspace confinement of every file tool.

use pretty_assertions::assert_eq;

use super::*;

/// Lays out the confinement fixture:
///
/// ```text
/// ws/inside.txt          ws/sub/inner.txt
/// ws/link_in_file  -> ws/inside.txt        ws/link_in_dir -> ws/sub
/// ws/link_out_file -> outside/secret.txt   ws/link_out_dir -> outside
/// ws/dangling_out  -> outside/missing.txt  ws/dangling_in -> ws/nowhere.txt
/// outside/secret.txt
/// ```
fn confinement_fixture(env: &Env) {
    use std::os::unix::fs::symlink;
    let (ws, out) = (env.ws(), env.outside());
    env.seed("inside.txt", "token inside\n");
    env.seed("sub/inner.txt", "token inner\n");
    std::fs::write(out.join("secret.txt"), "token secret\n").unwrap();
    symlink("inside.txt", ws.join("link_in_file")).unwrap();
    symlink(ws.join("sub"), ws.join("link_in_dir")).unwrap();
    symlink(out.join("secret.txt"), ws.join("link_out_file")).unwrap();
    symlink(&out, ws.join("link_out_dir")).unwrap();
    symlink(out.join("missing.txt"), ws.join("dangling_out")).unwrap();
    symlink("nowhere.txt", ws.join("dangling_in")).unwrap();
}

const FILE_TOOLS: [&str; 6] = [
    "read_file",
    "list_dir",
    "glob",
    "grep",
    "write_file",
    "edit_file",
];

/// The arguments a file tool gets for a case: directory tools take the
/// directory path, the others the file path.
fn file_tool_args(tool: &str, file: &str, dir: &str) -> Value {
    match tool {
        "read_file" => json!({"path": file}),
        "list_dir" => json!({"path": dir}),
        "glob" => json!({"pattern": "*", "path": dir}),
        "grep" => json!({"pattern": "token", "path": file}),
        "write_file" => json!({"path": file, "content": "pwned"}),
        "edit_file" => json!({"path": file, "old_string": "token", "new_string": "pwned"}),
        other => panic!("not a file tool: {other}"),
    }
}

/// Whether a path may be reached. Every allowed case leads to
/// `ws/inside.txt` (files) or a workspace directory, so the writers change
/// exactly that file.
#[derive(Debug, Clone, Copy)]
enum Verdict {
    Allowed,
    Refused,
}
use Verdict::{Allowed, Refused};

/// One row of the confinement table: the case, the tool, how the call
/// ended, and which entries of the temporary root it changed.
type ConfinementRow = (
    &'static str,
    &'static str,
    Result<(), ErrorCode>,
    Vec<String>,
);

/// Runs every file tool on one case in a fresh fixture. `{ws}` and `{out}`
/// in the paths stand for the absolute workspace and outside directories.
async fn check_confinement(label: &'static str, file: &str, dir: &str, verdict: Verdict) {
    let mut rows: Vec<ConfinementRow> = Vec::new();
    for tool in FILE_TOOLS {
        let env = Env::new(Mode::Work);
        confinement_fixture(&env);
        let fill = |t: &str| {
            t.replace("{ws}", &env.ws().display().to_string())
                .replace("{out}", &env.outside().display().to_string())
        };
        let before = env.tree();
        let outcome = env
            .call(tool, file_tool_args(tool, &fill(file), &fill(dir)))
            .await;
        let code = outcome.map(|_| ()).map_err(|e| e.code);
        rows.push((label, tool, code, changed(&before, &env.tree())));
    }
    let expected = FILE_TOOLS
        .iter()
        .map(|&tool| {
            let writes = matches!(tool, "write_file" | "edit_file");
            match verdict {
                Allowed if writes => (label, tool, Ok(()), vec!["ws/inside.txt".to_string()]),
                Allowed => (label, tool, Ok(()), vec![]),
                Refused => (label, tool, Err(ErrorCode::OutsideWorkspace), vec![]),
            }
        })
        .collect::<Vec<_>>();
    assert_eq!(rows, expected);
}

#[tokio::test]
async fn every_file_tool_is_confined_to_the_workspace() {
    #[rustfmt::skip]
    let cases = [
        // label                                   file path                     directory path
        ("dotdot",                                 "../outside/secret.txt",      "../outside",        Refused),
        ("dotdot_through_subdir",                  "sub/../../outside/secret.txt", "sub/../../outside", Refused),
        ("dotdot_above_fs_root",                   "../../../../../../../../../../etc/passwd", "../../../../../../../../../..", Refused),
        ("absolute_outside",                       "{out}/secret.txt",           "{out}",             Refused),
        ("absolute_system_file",                   "/etc/passwd",                "/etc",              Refused),
        ("symlink_to_outside_file",                "link_out_file",              "link_out_file",     Refused),
        ("symlink_to_outside_dir",                 "link_out_dir/secret.txt",    "link_out_dir",      Refused),
        ("new_file_through_outside_dir_symlink",   "link_out_dir/new.txt",       "link_out_dir/",     Refused),
        ("dangling_symlink_to_outside",            "dangling_out",               "dangling_out",      Refused),
        ("dangling_symlink_to_inside",             "dangling_in",                "dangling_in",       Refused),
        ("relative_inside",                        "inside.txt",                 "sub",               Allowed),
        ("dotdot_staying_inside",                  "sub/../inside.txt",          "sub/..",            Allowed),
        ("absolute_inside",                        "{ws}/inside.txt",            "{ws}/sub",          Allowed),
        ("symlink_inside_to_inside",               "link_in_file",               "link_in_dir",       Allowed),
    ];
    for (label, file, dir, verdict) in cases {
        check_confinement(label, file, dir, verdict).await;
    }
}

#[tokio::test]
async fn a_workspace_given_through_a_symlink_accepts_either_spelling() {
    let mut env = Env::new(Mode::Work);
    confinement_fixture(&env);
    let alias = env.root.path().join("alias");
    std::os::unix::fs::symlink(env.ws(), &alias).unwrap();
    env.ctx.workspace = Workspace::new(&alias).unwrap();
    let (alias, real) = (alias.display(), env.ws().display().to_string());
    let cases = [
        ("inside.txt".to_string(), Ok(())),
        (format!("{alias}/inside.txt"), Ok(())),
        (format!("{real}/inside.txt"), Ok(())),
        (
            format!("{alias}/link_out_file"),
            Err(ErrorCode::OutsideWorkspace),
        ),
        (
            format!("{alias}/../outside/secret.txt"),
            Err(ErrorCode::OutsideWorkspace),
        ),
    ];
    let mut actual = Vec::new();
    for (path, _) in &cases {
        let outcome = env.call("read_file", json!({"path": path})).await;
        actual.push((path.clone(), outcome.map(|_| ()).map_err(|e| e.code)));
    }
    assert_eq!(actual, cases);
}
