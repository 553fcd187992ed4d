//! Draws an [`App`]: a title line, the scrolling transcript, the approval card when one waits,
//! a status line and the input line.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use crate::app::{App, Approval, Entry, TOOL_LINES};

/// Lines of an edit's diff shown on its card.
const DIFF_LINES: usize = 8;

fn transcript(app: &App) -> Text<'static> {
    let mut lines: Vec<Line<'static>> = Vec::new();
    for entry in &app.entries {
        match entry {
            Entry::User(text) => {
                let style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
                for (i, part) in text.split('\n').enumerate() {
                    let mark = if i == 0 { "› " } else { "  " };
                    lines.push(Line::styled(format!("{mark}{part}"), style));
                }
            }
            Entry::Assistant(text) => {
                lines.extend(text.split('\n').map(|l| Line::raw(l.to_string())));
            }
            Entry::Reasoning(text) => {
                let style = Style::new()
                    .fg(Color::DarkGray)
                    .add_modifier(Modifier::ITALIC);
                lines.extend(text.split('\n').map(|l| Line::styled(l.to_string(), style)));
            }
            Entry::Tool {
                name,
                output,
                is_error,
                ..
            } => {
                let head = match output {
                    None => format!("⚙ {name} …"),
                    Some(_) if *is_error => format!("⚙ {name} failed"),
                    Some(_) => format!("⚙ {name}"),
                };
                lines.push(Line::styled(head, Style::new().fg(Color::Yellow)));
                if let Some(output) = output {
                    let style = if *is_error {
                        Style::new().fg(Color::Red)
                    } else {
                        Style::new().fg(Color::DarkGray)
                    };
                    let all: Vec<&str> = output.trim_end_matches('\n').split('\n').collect();
                    for line in all.iter().take(TOOL_LINES) {
                        lines.push(Line::styled(format!("  {line}"), style));
                    }
                    if all.len() > TOOL_LINES {
                        lines.push(Line::styled(
                            format!("  … {} more lines", all.len() - TOOL_LINES),
                            style,
                        ));
                    }
                }
            }
            Entry::Info(text) => lines.push(Line::styled(
                format!("· {text}"),
                Style::new().fg(Color::DarkGray),
            )),
            Entry::Error(text) => lines.push(Line::styled(
                format!("✗ {text}"),
                Style::new().fg(Color::Red),
            )),
        }
        lines.push(Line::raw(""));
    }
    Text::from(lines)
}

fn card(approval: &Approval, more: usize) -> Paragraph<'static> {
    let mut lines = vec![Line::raw(approval.summary.clone())];
    for line in approval.diff.iter().take(DIFF_LINES) {
        let style = match line.chars().next() {
            Some('+') => Style::new().fg(Color::Green),
            Some('-') => Style::new().fg(Color::Red),
            _ => Style::new(),
        };
        lines.push(Line::styled(line.clone(), style));
    }
    if approval.diff.len() > DIFF_LINES {
        lines.push(Line::raw(format!(
            "… {} more lines",
            approval.diff.len() - DIFF_LINES
        )));
    }
    lines.push(Line::from(vec![
        Span::styled("y", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(" allow  "),
        Span::styled("n", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(" deny  "),
        Span::styled("a", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!(" always allow {}", approval.name)),
    ]));
    let title = if more > 0 {
        format!(" {} wants to run ({more} more waiting) ", approval.name)
    } else {
        format!(" {} wants to run ", approval.name)
    };
    Paragraph::new(lines).wrap(Wrap { trim: false }).block(
        Block::new()
            .borders(Borders::ALL)
            .border_style(Style::new().fg(Color::Yellow))
            .title(title),
    )
}

pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let card = app
        .approvals
        .front()
        .map(|a| card(a, app.approvals.len() - 1));
    let card_height = card.as_ref().map_or(0, |c| {
        (c.line_count(area.width) as u16).min(area.height / 2)
    });
    let [top, body, card_area, status, input] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(card_height),
        Constraint::Length(1),
        Constraint::Length(3),
    ])
    .areas(area);

    let name = app.title.clone().unwrap_or_else(|| app.session.clone());
    let mut head = format!(" jucode · {name}");
    if let Some(model) = &app.model {
        head.push_str(&format!(" · {model}"));
    }
    if let Some(cwd) = &app.cwd {
        head.push_str(&format!(" · {cwd}"));
    }
    frame.render_widget(
        Paragraph::new(head).style(Style::new().add_modifier(Modifier::REVERSED)),
        top,
    );

    let text = Paragraph::new(transcript(app)).wrap(Wrap { trim: false });
    let total = text.line_count(body.width);
    let bottom = total.saturating_sub(body.height as usize);
    let offset = bottom.saturating_sub(app.scroll);
    frame.render_widget(text.scroll((offset.min(u16::MAX as usize) as u16, 0)), body);

    if let Some(card) = card {
        frame.render_widget(card, card_area);
    }

    let mut state = if app.quitting {
        "saving and leaving…".to_string()
    } else if app.busy {
        let doing = if app.status.is_empty() {
            "working"
        } else {
            &app.status
        };
        format!("{doing} · Ctrl-C interrupts")
    } else {
        "ready · Enter sends · /quit or Ctrl-D leaves".to_string()
    };
    if app.queued > 0 {
        state.push_str(&format!(" · {} queued", app.queued));
    }
    if app.scroll > 0 {
        state.push_str(" · scrolled up (PgDn)");
    }
    frame.render_widget(
        Paragraph::new(format!(" {state}")).style(Style::new().fg(Color::DarkGray)),
        status,
    );

    draw_input(frame, app, input);
}

fn draw_input(frame: &mut Frame, app: &App, area: Rect) {
    let inner_width = area.width.saturating_sub(2) as usize;
    // Keep the cursor in view on a long line: show the tail that holds it.
    let skip = app.cursor.saturating_sub(inner_width.saturating_sub(1));
    let shown: String = app.input.chars().skip(skip).take(inner_width).collect();
    let block = Block::new().borders(Borders::ALL).title(" message ");
    frame.render_widget(Paragraph::new(shown).block(block), area);
    if app.approvals.is_empty() && !app.quitting {
        frame.set_cursor_position(Position::new(
            area.x + 1 + (app.cursor - skip) as u16,
            area.y + 1,
        ));
    }
}
