"""A Hugging Face causal LM decoding a batch step by step: prefill, sample, drop finished rows.

Synchronous and not thread-safe: the generation loop calls it from one worker thread at a
time. CUDA in bf16 (fp16 where bf16 is unsupported) when present, fp32 on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from services.inference.answer.generative import weights
from services.inference.answer.generative.prompt import plain
from shared.encoder.embedder import pick_device


def pick_dtype(device: torch.device) -> torch.dtype:
    if device.type != "cuda":
        return torch.float32  # half precision on CPU is slow and lossy
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


@dataclass
class DecodeState:
    past: Any  # the model's KV cache for the rows still running
    mask: torch.Tensor  # [rows, length] attention mask, left-padded
    next_pos: torch.Tensor  # [rows] position id of each row's next token
    logits: torch.Tensor  # [rows, vocab] float32 logits for each row's next token


class CausalLM:
    def __init__(self, path: Path, device: str = "auto", cache_dir: Path | None = None,
                 ) -> None:
        """`path`: a Hugging Face folder, or a .gguf file dequantised once into `cache_dir`
        (weights.py)."""
        self.device = pick_device(device)
        self.dtype = pick_dtype(self.device)
        folder = weights.loadable(path, cache_dir or path.parent)
        # Left padding lines up every row's last token; left truncation, should a prompt
        # still be too long, drops the oldest context, never the question at its end.
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), padding_side="left",
                                                       truncation_side="left")
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        # An instruct model is prompted in its chat template, which writes its own special
        # tokens: the tokenizer must not add more.
        self.chat = bool(getattr(self.tokenizer, "chat_template", None))
        # A second tokenizer for counting on the event loop: a fast tokenizer used from
        # two threads at once fails ("Already borrowed").
        self.counter = AutoTokenizer.from_pretrained(str(folder))
        self._specials = 0 if self.chat else len(self.counter("")["input_ids"])
        self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=self.dtype)
        # PreTrainedModel.to is @wraps(Module.to), which typeshed types as unbound (the
        # device lands on `self`); the call itself is right.
        self.model = self.model.to(self.device).eval()  # type: ignore[arg-type]
        self.model_id = weights.model_name(path)
        config = self.model.config
        ends: list[object] = [self.tokenizer.eos_token_id, getattr(config, "eos_token_id", None)]
        generation = getattr(self.model, "generation_config", None)
        found = getattr(generation, "eos_token_id", None)
        ends += found if isinstance(found, list) else [found]
        if self.chat and weights.CHATML_END in self.tokenizer.get_vocab():
            ends.append(self.tokenizer.convert_tokens_to_ids(weights.CHATML_END))
        self.eos_ids = frozenset(i for i in ends if isinstance(i, int))
        self.max_positions = int(getattr(config, "max_position_embeddings", 0)
                                 or getattr(config, "n_positions", 2048))
        # The pace measured at warm-up (services/inference/runtime.py load_generator).
        self.warm_first_token_s = 0.5
        self.warm_per_token_s = 0.05

    def render(self, instruction: str, user: str) -> str:
        """The prompt text: the chat template's system and user turns, or plain text."""
        if not self.chat:
            return plain(instruction, user)
        turns = [{"role": "system", "content": instruction}, {"role": "user", "content": user}]
        return str(self.tokenizer.apply_chat_template(turns, tokenize=False,
                                                      add_generation_prompt=True))

    def prompt_room(self, max_new_tokens: int) -> int:
        """Tokens a prompt may count (as count_tokens does) and still fit with its answer."""
        return max(1, self.max_positions - max_new_tokens - self._specials)

    def count_tokens(self, text: str) -> int:
        return len(self.counter(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    @torch.inference_mode()
    def prefill(self, prompts: list[str], room: int) -> DecodeState:
        """Run the prompts (left-padded, cut to leave `room` positions for new tokens)."""
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, truncation=True,
                             max_length=max(1, self.max_positions - room),
                             add_special_tokens=not self.chat).to(self.device)
        mask = enc["attention_mask"]
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=enc["input_ids"], attention_mask=mask, position_ids=pos,
                         use_cache=True)
        return DecodeState(out.past_key_values, mask, pos[:, -1] + 1,
                           out.logits[:, -1, :].float())

    @torch.inference_mode()
    def step(self, state: DecodeState, tokens: torch.Tensor) -> DecodeState:
        """Append one token per row and compute the logits after it."""
        ones = torch.ones((len(tokens), 1), dtype=state.mask.dtype, device=self.device)
        mask = torch.cat([state.mask, ones], dim=1)
        out = self.model(input_ids=tokens.to(self.device)[:, None], attention_mask=mask,
                         position_ids=state.next_pos[:, None], past_key_values=state.past,
                         use_cache=True)
        return DecodeState(out.past_key_values, mask, state.next_pos + 1,
                           out.logits[:, -1, :].float())

    def merge(self, a: DecodeState, b: DecodeState) -> DecodeState:
        """One state holding a's rows then b's: how a prefilled newcomer joins a running
        batch between decode steps. The shorter side is left-padded (masked out) in the
        attention mask and in every layer's keys and values; positions stay per row."""
        length = max(a.mask.shape[1], b.mask.shape[1])
        for mine, theirs in zip(a.past.layers, b.past.layers, strict=True):
            mine.keys = torch.cat([_left_pad(mine.keys, length, 2),
                                   _left_pad(theirs.keys, length, 2)])
            mine.values = torch.cat([_left_pad(mine.values, length, 2),
                                     _left_pad(theirs.values, length, 2)])
        mask = torch.cat([_left_pad(a.mask, length, 1), _left_pad(b.mask, length, 1)])
        return DecodeState(a.past, mask, torch.cat([a.next_pos, b.next_pos]),
                           torch.cat([a.logits, b.logits]))

    def keep_rows(self, state: DecodeState, rows: list[int]) -> DecodeState:
        """Drop finished rows so the next steps compute only the live ones."""
        index = torch.tensor(rows, device=self.device)
        state.past.batch_select_indices(index)
        return DecodeState(state.past, state.mask[index], state.next_pos[index],
                           state.logits[index])


def _left_pad(t: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    """`t` zero-padded on the left along `dim` to `length`."""
    missing = length - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def choose(logits: torch.Tensor, temperatures: list[float], seed: int | None = None,
           ) -> list[int]:
    """Greedy for rows at temperature 0, sampled from softmax(logits / t) otherwise."""
    greedy = logits.argmax(dim=-1)
    temps = torch.tensor(temperatures, dtype=logits.dtype, device=logits.device)
    if not bool((temps > 0).any()):
        return [int(t) for t in greedy.tolist()]
    gen = torch.Generator(device=logits.device)
    if seed is not None:
        gen.manual_seed(seed)
    probs = torch.softmax(logits / temps.clamp(min=1e-5)[:, None], dim=-1)
    sampled = torch.multinomial(probs, 1, generator=gen).squeeze(1)
    return [int(t) for t in torch.where(temps > 0, sampled, greedy).tolist()]
