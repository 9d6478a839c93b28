"""`dual`: two models answer independently in parallel, each reviews the other's answer (and,
with rounds > 1, revises its own after the review), then the synthesizer writes the answer."""

from __future__ import annotations

from typing import Any

from services.dispatcher.engine.context import NodeContext
from services.dispatcher.engine.gather import gather_all
from services.dispatcher.llm.api import LLMRequest
from shared.contract.dsl import DualConfig

REVIEW = ("Review another assistant's answer to the question below: point out errors, gaps and what is "
          "good. Be specific and brief.")
REVISE = "Improve your answer using the review. Answer with the improved answer only."
SYNTHESISE = ("Two assistants answered the question and reviewed each other. Write the best final answer, "
              "using what is right in each and fixing what the reviews found wrong.")


async def run(ctx: NodeContext) -> dict[str, Any]:
    config: DualConfig = ctx.node.config
    prompt = ctx.render("config.prompt")
    system = ctx.render("config.system") if config.system is not None else None
    base = [{"role": "system", "content": system}] if system else []

    async def ask(model: str, messages: list[dict[str, Any]]) -> str:
        return (await ctx.complete(LLMRequest(messages=messages, model=model, stream=False), stream=False)).text

    models = config.models
    drafts = await gather_all([ask(m, [*base, {"role": "user", "content": prompt}]) for m in models])
    reviews: list[str] = []
    for round_ in range(config.rounds):
        # reviews[i] is model i's review of the other model's draft.
        reviews = await gather_all([
            ask(models[i], [{"role": "system", "content": REVIEW},
                            {"role": "user", "content": f"Question:\n{prompt}\n\nAnswer:\n{drafts[1 - i]}"}])
            for i in range(2)
        ])
        if round_ + 1 < config.rounds:
            drafts = await gather_all([
                ask(models[i], [*base, {"role": "user", "content": prompt},
                                {"role": "assistant", "content": drafts[i]},
                                {"role": "user", "content": f"{REVISE}\n\nReview:\n{reviews[1 - i]}"}])
                for i in range(2)
            ])
    material = "\n\n".join([
        f"Question:\n{prompt}",
        *(f"Answer {i + 1} ({models[i]}):\n{drafts[i]}" for i in range(2)),
        *(f"Review of answer {2 - i} by {models[i]}:\n{reviews[i]}" for i in range(2)),
    ])
    synthesizer = models[config.synthesizer]
    final = await ctx.complete(LLMRequest(messages=[{"role": "system", "content": SYNTHESISE},
                                                    {"role": "user", "content": material}],
                                          model=synthesizer))
    return {"answer": final.text, "drafts": drafts, "reviews": reviews}
