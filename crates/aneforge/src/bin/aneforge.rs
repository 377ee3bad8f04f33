//! The `aneforge` command line (see `aneforge::cli`): parse the arguments, run the command, exit
//! with its code.

fn main() {
    std::process::exit(aneforge::cli::run_cli(std::env::args_os()));
}
