//! Themes: TOML files of semantic colour slots. The bundled ones (`themes/*.toml`) are compiled in;
//! files in `<config dir>/themes/` (or `$INCHARACTER_DATA_DIR/themes/`) add to them or replace one of
//! the same name. A slot a file leaves out falls back to the default theme's.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use crate::domain::diagnostic::{Diagnostic, Source};

const BUNDLED: [(&str, &str); 3] = [
    ("default-dark.toml", include_str!("../../themes/default-dark.toml")),
    ("light.toml", include_str!("../../themes/light.toml")),
    ("high-contrast.toml", include_str!("../../themes/high-contrast.toml")),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub bg: Color,
    pub fg: Color,
    pub dim: Color,
    pub title: Color,
    pub border: Color,
    pub border_focus: Color,
    pub accent: Color,
    pub selection_fg: Color,
    pub selection_bg: Color,
    pub measured: Color,
    pub label_pdb: Color,
    pub label_annotation: Color,
    pub label_target: Color,
    pub positive: Color,
    pub negative: Color,
    pub marginal: Color,
    pub error: Color,
    pub warning: Color,
    pub streaming: Color,
    pub experimenter: Color,
    pub character: Color,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTheme {
    name: String,
    #[serde(default)]
    colors: BTreeMap<toml::Spanned<String>, toml::Spanned<String>>,
}

impl Theme {
    pub fn base(&self) -> Style {
        Style::default().fg(self.fg).bg(self.bg)
    }

    pub fn dim(&self) -> Style {
        Style::default().fg(self.dim)
    }

    pub fn title(&self) -> Style {
        Style::default().fg(self.title).add_modifier(Modifier::BOLD)
    }

    pub fn border(&self, focused: bool) -> Style {
        Style::default().fg(if focused { self.border_focus } else { self.border })
    }

    pub fn selected(&self) -> Style {
        Style::default().fg(self.selection_fg).bg(self.selection_bg)
    }

    pub fn fg(&self, color: Color) -> Style {
        Style::default().fg(color)
    }

    fn slot(&mut self, name: &str) -> Option<&mut Color> {
        Some(match name {
            "bg" => &mut self.bg,
            "fg" => &mut self.fg,
            "dim" => &mut self.dim,
            "title" => &mut self.title,
            "border" => &mut self.border,
            "border_focus" => &mut self.border_focus,
            "accent" => &mut self.accent,
            "selection_fg" => &mut self.selection_fg,
            "selection_bg" => &mut self.selection_bg,
            "measured" => &mut self.measured,
            "label_pdb" => &mut self.label_pdb,
            "label_annotation" => &mut self.label_annotation,
            "label_target" => &mut self.label_target,
            "positive" => &mut self.positive,
            "negative" => &mut self.negative,
            "marginal" => &mut self.marginal,
            "error" => &mut self.error,
            "warning" => &mut self.warning,
            "streaming" => &mut self.streaming,
            "experimenter" => &mut self.experimenter,
            "character" => &mut self.character,
            _ => return None,
        })
    }

    /// Parses a theme file over `fallback`.
    pub fn parse(source: Source<'_>, fallback: &Theme) -> Result<Theme, Diagnostic> {
        let raw: RawTheme = toml::from_str(source.text).map_err(|e| source.toml_error(&e))?;
        let mut theme = fallback.clone();
        theme.name = raw.name;
        for (slot, value) in raw.colors {
            let color = Color::from_str(value.get_ref().trim()).map_err(|_| {
                source.at(
                    value.span(),
                    format!(
                        "\"{}\" is not a colour (use #rrggbb, a name, or 0–255)",
                        value.get_ref()
                    ),
                )
            })?;
            let Some(target) = theme.slot(slot.get_ref()) else {
                return Err(source.at(slot.span(), format!("unknown colour slot \"{}\"", slot.get_ref())));
            };
            *target = color;
        }
        Ok(theme)
    }
}

/// The default theme (bundled, so it always parses).
pub fn default_theme() -> Theme {
    let black = Theme {
        name: String::new(),
        bg: Color::Reset,
        fg: Color::Reset,
        dim: Color::Gray,
        title: Color::Cyan,
        border: Color::Gray,
        border_focus: Color::Cyan,
        accent: Color::Yellow,
        selection_fg: Color::Black,
        selection_bg: Color::Cyan,
        measured: Color::Yellow,
        label_pdb: Color::Magenta,
        label_annotation: Color::Green,
        label_target: Color::Cyan,
        positive: Color::Green,
        negative: Color::Red,
        marginal: Color::Gray,
        error: Color::Red,
        warning: Color::Yellow,
        streaming: Color::Blue,
        experimenter: Color::Blue,
        character: Color::Yellow,
    };
    Theme::parse(Source::new(BUNDLED[0].0, BUNDLED[0].1), &black).expect("the bundled default theme parses")
}

/// The largest theme file read (a theme is a few hundred bytes).
const MAX_THEME: u64 = 1024 * 1024;

/// What the status line says of a configured theme there is none of, `using` the one drawn instead:
/// a theme file that could not be read may be the one named, so where it is wrong is said too (the
/// file named after it first).
pub fn not_found(name: &str, using: &str, skipped: &[String]) -> String {
    let own = format!("/{name}.toml:");
    let mut skipped: Vec<&String> = skipped.iter().collect();
    skipped.sort_by_key(|e| !e.contains(&own));
    let skipped = match skipped.as_slice() {
        [] => String::new(),
        [one] => format!(" (skipped: {one})"),
        [first, more @ ..] => format!(
            " (skipped: {first}, and {} more: incharacter doctor lists them)",
            more.len()
        ),
    };
    format!("no theme \"{name}\": using {using}{skipped}")
}

/// Bundled themes, then those in `user_dir` (replacing bundled ones of the same name). Files that
/// cannot be read or do not parse are reported and skipped.
pub fn load_all(user_dir: Option<&Path>) -> (Vec<Theme>, Vec<Diagnostic>) {
    let default = default_theme();
    let mut themes: Vec<Theme> = BUNDLED
        .iter()
        .map(|(name, text)| Theme::parse(Source::new(name, text), &default).expect("bundled themes parse"))
        .collect();
    let mut errors = Vec::new();
    let mut files: Vec<_> = user_dir
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    // The user file each theme name came from: two files of one name are one mistake, said, and the
    // first (in name order) is the one used.
    let mut from: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for path in files {
        let name = path.display().to_string();
        // As the config file is read: a FIFO or a device is refused unopened (it would never end),
        // bad UTF-8 is located, and a file that cannot be read is said, not skipped in silence.
        let text = match crate::files::read_text_limited(&path, MAX_THEME, "a theme file") {
            Ok(text) => text,
            Err(crate::files::FileError::NotUtf8 { line, column, .. }) => {
                errors.push(Diagnostic {
                    file: name,
                    line,
                    column,
                    message: "not UTF-8 text".into(),
                });
                continue;
            }
            Err(e) => {
                errors.push(Source::new(&name, "").whole(format!("cannot read the theme: {e}")));
                continue;
            }
        };
        match Theme::parse(Source::new(&name, &text), &default) {
            Ok(t) => {
                if let Some(first) = from.get(&t.name) {
                    /// Where the file gives its name.
                    #[derive(Deserialize)]
                    struct Named {
                        name: toml::Spanned<String>,
                    }
                    let source = Source::new(&name, &text);
                    let message = format!(
                        "theme \"{}\" is also in {first}, which is used: this file is skipped (give it another name)",
                        t.name
                    );
                    errors.push(match toml::from_str::<Named>(&text) {
                        Ok(named) => source.at(named.name.span(), message),
                        Err(_) => source.whole(message),
                    });
                    continue;
                }
                from.insert(t.name.clone(), name.clone());
                match themes.iter_mut().find(|x| x.name == t.name) {
                    Some(slot) => *slot = t,
                    None => themes.push(t),
                }
            }
            Err(e) => errors.push(e),
        }
    }
    (themes, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_theme_not_found_names_the_files_skipped() {
        assert_eq!(
            not_found("nord", "default-dark", &[]),
            "no theme \"nord\": using default-dark"
        );
        let one = ["themes/broken.toml:3:6: \"#zzzzzz\" is not a colour".to_string()];
        assert_eq!(
            not_found("broken", "default-dark", &one),
            "no theme \"broken\": using default-dark (skipped: themes/broken.toml:3:6: \"#zzzzzz\" is not a colour)"
        );
        let two = ["themes/x.toml:1:1: not UTF-8 text".to_string(), one[0].clone()];
        let said = not_found("broken", "default-dark", &two);
        assert!(
            said.contains("(skipped: themes/broken.toml:3:6:"),
            "the named theme's file first: {said}"
        );
        assert!(said.ends_with("and 1 more: incharacter doctor lists them)"), "{said}");
    }

    #[test]
    fn bundled_themes_parse_and_differ() {
        let (themes, errors) = load_all(None);
        assert!(errors.is_empty());
        let names: Vec<&str> = themes.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["default-dark", "light", "high-contrast"]);
        assert_ne!(themes[0].measured, themes[0].label_pdb);
        assert_ne!(themes[0].label_pdb, themes[0].label_annotation);
        assert_eq!(themes[2].bg, Color::Black);
    }

    #[cfg(unix)]
    #[test]
    fn a_theme_that_cannot_be_read_is_said_and_a_fifo_never_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("latin1.toml"), b"name = \"mine\"\n# caf\xe9\n").unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("pipe.toml"))
            .status()
            .unwrap();
        assert!(made.success());
        // Opened, the FIFO would wait for a writer: the test would hang, not fail.
        let (themes, errors) = load_all(Some(dir.path()));
        assert_eq!(themes.len(), 3, "the bundled ones");
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].ends_with("latin1.toml:2:6: not UTF-8 text"), "{said:?}");
        assert!(
            said[1].contains("pipe.toml") && said[1].contains("cannot read the theme"),
            "{said:?}"
        );
    }

    #[test]
    fn user_themes_fall_back_per_slot_and_errors_are_located() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mine.toml"),
            "name = \"mine\"\n[colors]\naccent = \"#ff0000\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("bad.toml"),
            "name = \"bad\"\n[colors]\naccent = \"nope\"\n",
        )
        .unwrap();
        let (themes, errors) = load_all(Some(dir.path()));
        let mine = themes.iter().find(|t| t.name == "mine").unwrap();
        assert_eq!(mine.accent, Color::Rgb(255, 0, 0));
        assert_eq!(mine.measured, default_theme().measured);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("bad.toml:3:10"), "{}", errors[0]);
    }

    /// Two user files giving one theme name: the first (in name order) is used, the other named as
    /// skipped, not chosen between in silence.
    #[test]
    fn two_user_themes_of_one_name_are_said_and_the_first_used() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("d1.toml"),
            "name = \"dup\"\n[colors]\naccent = \"#ff0000\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("d2.toml"),
            "# mine\nname = \"dup\"\n[colors]\naccent = \"#00ff00\"\n",
        )
        .unwrap();
        let (themes, errors) = load_all(Some(dir.path()));
        let dup: Vec<&Theme> = themes.iter().filter(|t| t.name == "dup").collect();
        assert_eq!(dup.len(), 1);
        assert_eq!(dup[0].accent, Color::Rgb(255, 0, 0));
        assert_eq!(errors.len(), 1, "{errors:?}");
        let said = errors[0].to_string();
        assert!(said.contains("d2.toml:2:8: theme \"dup\" is also in"), "{said}");
        assert!(said.contains("d1.toml, which is used"), "{said}");
    }
}
