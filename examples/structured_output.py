"""Typed structured output: the final answer as a Pydantic model, validated (with retries).

output_type= asks the provider for that shape (strict where it can); an answer that does
not validate goes back to the model with the error, a bounded number of times.
"""

from pydantic import BaseModel, Field

import tooldeck
from tooldeck.providers import model_from_env
from tooldeck.testing import ScriptedModel, call, reply


class Invoice(BaseModel):
    customer: str
    total_eur: float = Field(ge=0)
    paid: bool


@tooldeck.tool(read_only=True)
def find_invoice(number: int) -> dict:
    """Look an invoice up by its number."""
    return {"number": number, "customer": "ACME", "lines": [120.0, 80.5], "paid": False}


offline = ScriptedModel(
    [
        reply(call("find_invoice", {"number": 42})),
        reply('{"customer": "ACME", "total_eur": -1, "paid": false}'),  # invalid: sent back
        reply('{"customer": "ACME", "total_eur": 200.5, "paid": false}'),
    ]
)
result = tooldeck.run_sync(
    model_from_env(offline), [find_invoice], "Summarise invoice 42.", output_type=Invoice
)
invoice: Invoice = result.structured
print(f"{type(invoice).__name__}: {invoice.customer} owes {invoice.total_eur} EUR", end="")
print(f", paid={invoice.paid}")
print("model steps:", result.steps)
