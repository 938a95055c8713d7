#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| bb7_fuzz::sse::run(data));
