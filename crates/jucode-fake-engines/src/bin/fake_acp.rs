//! A fake `acp` engine CLI that replays a recording (see `jucode_fake_engines::replay`).

fn main() {
    jucode_fake_engines::replay::main_for(jucode_fake_engines::replay::Flavor::Acp)
}
