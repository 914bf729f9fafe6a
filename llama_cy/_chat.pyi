from collections.abc import Iterable, Mapping

def chat_builtin_templates() -> list[str]: ...
def chat_apply_template(
    template: str,
    messages: Iterable[Mapping[str, object]],
    add_generation_prompt: bool = True,
) -> str: ...
