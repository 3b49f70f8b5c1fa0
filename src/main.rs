//! The collbench binary: everything is in [`collbench::commands::main`].

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    std::process::exit(collbench::commands::main(&argv));
}
