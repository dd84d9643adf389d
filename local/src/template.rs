//! A GGUF's chat template (Jinja, code from the file) rendered into a prompt's text on a budget of
//! instructions and text, and ChatML for files that carry none or one that cannot render a
//! conversation.

/// The chat template SmolLM2 and Qwen use, for GGUFs that carry none.
pub(crate) const CHATML: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// Instructions a chat template may run for one prompt: the templates of known models take a few
/// thousand for an interview's conversation; a loop that would run for hours stops here.
const TEMPLATE_FUEL: u64 = 5_000_000;

/// The most text a chat template may write for one prompt, far beyond any context.
const TEMPLATE_TEXT: usize = 16 << 20;

/// A writer that refuses to take more than [`TEMPLATE_TEXT`] bytes.
struct Capped(Vec<u8>);

impl std::io::Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + bytes.len() > TEMPLATE_TEXT {
            return Err(std::io::Error::other(format!(
                "the template wrote more than {TEMPLATE_TEXT} bytes"
            )));
        }
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `template` (Jinja, from a file) rendered for `messages`, on a budget of instructions and text.
pub(crate) fn render_template(
    template: &str,
    messages: &[serde_json::Value],
    add_generation_prompt: bool,
    (bos, eos): (&str, &str),
) -> Result<String, String> {
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
        Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
    });
    let ctx = minijinja::context! { messages => messages, add_generation_prompt => add_generation_prompt, bos_token => bos, eos_token => eos };
    let mut out = Capped(Vec::new());
    env.template_from_str(template)
        .and_then(|t| t.render_captured_to(&ctx, &mut out).map(|_| ()))
        .map_err(|e| match e.kind() {
            minijinja::ErrorKind::OutOfFuel => format!("it ran more than {TEMPLATE_FUEL} instructions"),
            // The only writer that fails is the cap's.
            minijinja::ErrorKind::WriteFailure => format!("it wrote more than {TEMPLATE_TEXT} bytes"),
            _ => e.to_string(),
        })?;
    Ok(String::from_utf8_lossy(&out.0).into_owned())
}

/// Why a file's chat template cannot render an ordinary conversation (a system message, a user's,
/// the assistant's turn to come), if it cannot: the model then uses ChatML.
pub fn template_problem(template: &str) -> Option<String> {
    let probe = [
        serde_json::json!({"role": "system", "content": "You are a character."}),
        serde_json::json!({"role": "user", "content": "How are you?"}),
    ];
    render_template(template, &probe, true, ("", "")).err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_template_runs_on_a_budget_and_one_that_fails_is_said() {
        let messages = [serde_json::json!({"role": "user", "content": "hi"})];
        let forever = "{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10000) %}\
                       {% endfor %}{% endfor %}{% endfor %}";
        let e = render_template(forever, &messages, true, ("", "")).unwrap_err();
        assert!(e.contains("more than 5000000 instructions"), "{e}");
        let flood = "{% for a in range(100000) %}{{ 'x' * 1000 }}{% endfor %}";
        let e = render_template(flood, &messages, true, ("", "")).unwrap_err();
        assert!(e.contains("wrote more than 16777216 bytes"), "{e}");
        assert!(template_problem("{% if %}").is_some());
        assert!(
            template_problem("{{ raise_exception('no system role') }}")
                .unwrap()
                .contains("no system role")
        );
        assert_eq!(template_problem(CHATML), None);
    }
}
