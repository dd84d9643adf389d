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

/// Why a file's chat template cannot render an ordinary conversation (a user's message, the
/// assistant's turn to come; with a system message first, or without one for templates that refuse
/// a system role, as Mistral's do), if it cannot: the model then uses ChatML. A template that takes
/// one of the two keeps its own, and a request it cannot render falls back to ChatML alone.
pub fn template_problem(template: &str) -> Option<String> {
    let system = serde_json::json!({"role": "system", "content": "You are a character."});
    let user = serde_json::json!({"role": "user", "content": "How are you?"});
    let with_system = render_template(template, &[system, user.clone()], true, ("", ""));
    match with_system {
        Ok(_) => None,
        Err(e) => render_template(template, &[user], true, ("", "")).err().map(|_| e),
    }
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
        // A template that refuses a system role (Mistral's) keeps its own: a conversation without
        // one renders.
        let no_system = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}\
                         {% endif %}[INST] {{ m.content }} [/INST]{% endfor %}";
        assert_eq!(template_problem(no_system), None);
    }
}
