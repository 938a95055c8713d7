//! `gen`: an example generic component. It does not export `bb7:tool/tool`: each exported
//! function is a tool (`gen__add_u8`, `gen__types_echo`, …) whose JSON Schema bb7 derives from the
//! WIT types (`wit/world.wit`). `swap` is left undocumented in the manifest on purpose (`bb7 tools
//! audit` marks it), and `bump` takes a resource, so it is not offered.

wit_bindgen::generate!({
    path: "wit",
    world: "generic-types",
});

use std::cell::Cell;

use exports::example::generic_types::types::{
    Color, CounterBorrow, Guest as TypesGuest, GuestCounter, Perms, Point, Shape,
};

/// The manifest, embedded as the custom section `bb7-manifest` (as the other examples do).
const MANIFEST_LEN: usize = include_bytes!("../bb7-tool.toml").len();
#[unsafe(link_section = "bb7-manifest")]
#[used]
static MANIFEST: [u8; MANIFEST_LEN] = *include_bytes!("../bb7-tool.toml");

struct Component;

impl Guest for Component {
    fn add_u8(a: u8, b: u8) -> u8 {
        a.saturating_add(b)
    }

    fn echo(s: String) -> String {
        s
    }

    fn code_point(c: char) -> u32 {
        c as u32
    }

    fn largest(n: u64) -> u64 {
        n
    }
}

/// A counter resource (only to have a function that takes one).
pub struct MyCounter(Cell<u32>);

impl GuestCounter for MyCounter {
    fn new(start: u32) -> Self {
        MyCounter(Cell::new(start))
    }

    fn get(&self) -> u32 {
        self.0.get()
    }
}

impl TypesGuest for Component {
    type Counter = MyCounter;

    fn echo(s: String) -> String {
        s
    }

    fn translate(p: Point, dx: i32, dy: i32) -> Point {
        Point {
            x: p.x.saturating_add(dx),
            y: p.y.saturating_add(dy),
        }
    }

    fn swap(t: (String, i64)) -> (i64, String) {
        (t.1, t.0)
    }

    fn sum(xs: Vec<f32>) -> f64 {
        xs.iter().map(|x| f64::from(*x)).sum()
    }

    fn next_color(c: Color) -> Color {
        match c {
            Color::Red => Color::Green,
            Color::Green => Color::Blue,
            Color::Blue => Color::Red,
        }
    }

    fn invert(p: Perms) -> Perms {
        Perms::all() - p
    }

    fn area(s: Shape) -> f64 {
        match s {
            Shape::Circle(r) => std::f64::consts::PI * r * r,
            Shape::Square(a) => a * a,
            Shape::Empty => 0.0,
        }
    }

    fn maybe_double(n: Option<i16>) -> Option<i16> {
        n.map(|n| n.saturating_mul(2))
    }

    fn divide(a: i32, b: i32) -> Result<i32, String> {
        if b == 0 {
            return Err("division by zero".to_string());
        }
        a.checked_div(b)
            .ok_or_else(|| "the quotient does not fit in s32".to_string())
    }

    fn bump(c: CounterBorrow<'_>) -> u32 {
        let c: &MyCounter = c.get();
        c.0.set(c.0.get() + 1);
        c.0.get()
    }
}

export!(Component);
