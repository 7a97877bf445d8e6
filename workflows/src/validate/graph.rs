//! The graph: cycles in `needs`, and step references in templates
//! (prompts, scopes and check commands).

use super::{Validator, span};
use crate::format::RawFile;
use crate::model::{Check, ForEach, OutputKind, Workflow};
use crate::template::{Ref, Template};

impl Validator<'_> {
    /// Reports every cycle of `needs` once, with its path.
    pub(super) fn cycles(&mut self, workflow: &Workflow, raw: &RawFile) {
        let n = workflow.steps.len();
        // 0 = unseen, 1 = on the current path, 2 = done.
        let mut mark = vec![0u8; n];
        let mut path = Vec::new();
        for start in 0..n {
            self.visit(workflow, raw, start, &mut mark, &mut path);
        }
    }

    pub(super) fn visit(
        &mut self,
        w: &Workflow,
        raw: &RawFile,
        s: usize,
        mark: &mut [u8],
        path: &mut Vec<usize>,
    ) {
        match mark[s] {
            2 => return,
            1 => {
                let from = path.iter().position(|&p| p == s).unwrap_or(0);
                let names: Vec<&str> = path[from..]
                    .iter()
                    .chain(std::iter::once(&s))
                    .map(|&i| w.steps[i].name.as_str())
                    .collect();
                let at = raw.steps[s].get_ref().needs.as_ref().map(|n| n.span());
                self.error(at, format!("cycle in needs: {}", names.join(" → ")));
                return;
            }
            _ => {}
        }
        mark[s] = 1;
        path.push(s);
        for &n in &w.steps[s].needs {
            self.visit(w, raw, n, mark, path);
        }
        path.pop();
        mark[s] = 2;
    }

    /// Step references in templates: only to steps this one needs
    /// (directly or not); `.output` of a single step, `.outputs` of a
    /// fan-out; `{{item}}` and `{{index}}` only in a fan-out. A `for_each`
    /// over a step's output needs that step to answer JSON.
    pub(super) fn references(&mut self, w: &mut Workflow, raw: &RawFile) {
        if self
            .diagnostics
            .iter()
            .any(|d| d.message.starts_with("cycle in needs"))
        {
            return;
        }
        for (id, step) in w.steps.iter().enumerate() {
            let raw_step = raw.steps[id].get_ref();
            let mut fields: Vec<(Template, usize, &str)> =
                std::iter::once((step.prompt.clone(), &raw_step.prompt, "prompt"))
                    .chain(
                        step.scope
                            .iter()
                            .zip(raw_step.scope.iter().flat_map(|s| s.get_ref()))
                            .map(|(t, r)| (t.clone(), r, "scope")),
                    )
                    .map(|(t, text, field)| (t, self.content_start(text), field))
                    .collect();
            if let (Some(Check::Command(command)), Some(raw)) = (&step.check, &raw_step.check)
                && let Ok(template) = Template::parse(command)
            {
                fields.push((template, self.content_at(raw.span().start), "check"));
            }
            for (template, start, field) in &fields {
                for (r, range) in template.refs() {
                    let at = Some(start + range.start..start + range.end);
                    let problem = match r {
                        Ref::Item | Ref::Index if step.for_each.is_none() => {
                            Some(format!("{r} is only available in a step with for_each"))
                        }
                        // An output is the model's text: in a command it
                        // would be the model choosing what runs.
                        Ref::Output(_) | Ref::Outputs(_) if *field == "check" => Some(format!(
                            "{r} cannot be used in a check (a step's output is the model's text; \
                             a check renders only {{{{item}}}}, {{{{index}}}} and {{{{vars.NAME}}}})"
                        )),
                        Ref::Output(other) | Ref::Outputs(other) => match w.step_id(other) {
                            None => Some(format!("{r}: there is no step '{other}'")),
                            Some(o) if !w.depends_on(id, o) => Some(format!(
                                "{r}: step '{other}' is not in the needs of '{}' (directly or through another step)",
                                step.name
                            )),
                            Some(o) => match (r, w.steps[o].for_each.is_some()) {
                                (Ref::Output(_), true) => Some(format!(
                                    "{r}: step '{other}' fans out; use {{{{steps.{other}.outputs}}}}"
                                )),
                                (Ref::Outputs(_), false) => Some(format!(
                                    "{r}: step '{other}' does not fan out; use {{{{steps.{other}.output}}}}"
                                )),
                                (Ref::Output(_), false) | (Ref::Outputs(_), true) => None,
                                (Ref::Var(_) | Ref::Item | Ref::Index, _) => None,
                            },
                        },
                        Ref::Var(_) | Ref::Item | Ref::Index => None,
                    };
                    if let Some(problem) = problem {
                        self.error(at, format!("step '{}': {field}: {problem}", step.name));
                    }
                }
            }
            if let (Some(ForEach::Output(source)), Some(f)) = (&step.for_each, &raw_step.for_each) {
                let over = &w.steps[*source];
                if over.output != OutputKind::Json || over.for_each.is_some() {
                    self.error(
                        span(f),
                        format!(
                            "step '{}': for_each over step '{}', which does not answer a JSON list (give it output = \"json\"{})",
                            step.name,
                            over.name,
                            if over.for_each.is_some() { " and no for_each" } else { "" }
                        ),
                    );
                }
            }
        }
    }
}
