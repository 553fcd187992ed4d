//! What the TUI draws, as insta snapshots of ratatui's test backend: a conversation with a
//! tool call, an approval card with an edit, a long input line, hostile text, a busy turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use jucode_protocol::serve::Event;
use jucode_tui::{App, view};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::{Value, json};

fn app(events: &[Value]) -> App {
    let mut app = App::new("s-1");
    for e in events {
        app.on_event(&Event(e.as_object().cloned().unwrap()));
    }
    app
}

fn screen(app: &App, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| view::draw(f, app)).unwrap();
    terminal.backend().to_string()
}

fn startup() -> Value {
    json!({"type":"startup","model":"fake-model","cwd":"/p"})
}

#[test]
fn a_conversation_with_a_tool_call() {
    let app = app(&[
        startup(),
        json!({"type":"session_title","title":"Listing files"}),
        json!({"type":"user_message","content":"list the files"}),
        json!({"type":"assistant_start"}),
        json!({"type":"assistant_delta","delta":"Running ls."}),
        json!({"type":"tool_start","call_id":"c1","name":"bash"}),
        json!({"type":"tool_output","call_id":"c1","name":"bash","output":"a.txt\nb.txt\n","is_error":false}),
        json!({"type":"assistant_start"}),
        json!({"type":"assistant_delta","delta":"Two files: a.txt and b.txt, which is a longer line that wraps."}),
        json!({"type":"status","message":"ready"}),
    ]);
    insta::assert_snapshot!(screen(&app, 50, 18));
}

#[test]
fn a_running_turn_with_a_queued_message_and_a_long_tool_output() {
    let output: String = (1..=20).map(|i| format!("line {i}\n")).collect();
    let app = app(&[
        startup(),
        json!({"type":"user_message","content":"count"}),
        json!({"type":"tool_start","call_id":"c1","name":"bash"}),
        json!({"type":"tool_output","call_id":"c1","name":"bash","output":output,"is_error":false}),
        json!({"type":"tool_start","call_id":"c2","name":"read"}),
        json!({"type":"pending_messages","messages":[{"content":"next"}]}),
        json!({"type":"status","message":"streaming"}),
    ]);
    insta::assert_snapshot!(screen(&app, 50, 24));
}

#[test]
fn an_approval_card_with_an_edit() {
    let app = app(&[
        startup(),
        json!({"type":"user_message","content":"fix it"}),
        json!({"type":"approval_request","call_id":"c1","name":"edit","summary":"edit src/a.rs",
            "hunks":[{"id":"h1","file":"src/a.rs","header":"@@ -1,2 +1,2 @@","lines":[" fn a() {","-    1","+    2"," }"]}]}),
        json!({"type":"approval_request","call_id":"c2","name":"bash","summary":"cargo test"}),
    ]);
    insta::assert_snapshot!(screen(&app, 50, 20));
}

#[test]
fn a_long_input_line_keeps_the_cursor_in_view() {
    let mut app = app(&[startup()]);
    app.on_paste("a long message that does not fit in the input box of a narrow terminal");
    app.on_key(KeyEvent::new(KeyCode::Char('!'), KeyModifiers::NONE));
    insta::assert_snapshot!(screen(&app, 30, 8));
}

#[test]
fn hostile_text_is_drawn_inert() {
    let app = app(&[
        startup(),
        json!({"type":"transcript","items":[
            {"role":"user","content":"show \u{1b}]0;owned\u{7}"},
            {"role":"assistant","content":"\u{1b}[2J\u{1b}[31mred\u{1b}[0m\r\nnext"},
        ]}),
        json!({"type":"error","message":"model said \u{1b}[H"}),
    ]);
    let shown = screen(&app, 40, 12);
    assert!(!shown.contains('\u{1b}'), "{shown}");
    insta::assert_snapshot!(shown);
}
