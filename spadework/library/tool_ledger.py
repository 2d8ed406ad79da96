"""Accounts receivable: chase the worst overdue account, credit one invoice, charge a late fee.

A small company's ledger holds 12-18 customers and 30-50 invoices, drawn from the seed. The
agent pages through invoices (10 per page), finds the customer with the most overdue invoices,
flags that account for collection, credits that customer's largest overdue invoice, sets a late
fee of 5% of what is still overdue, and reports the customer's new outstanding balance.

Each step depends on the one before it (which customer; which invoice; the fee after the credit),
and each is judged from the ledger's state: flagging, crediting or charging the wrong account
leaves the step open, so calling a mutation on everything does not win. ``send_reminder`` and
``convert_currency`` are never needed. ``reset(seed=None)`` plays seed 0.
"""

import random

from toolenv import Instruction, ToolEnv, ToolError, render_record, render_records

ENV_CLASS = "LedgerEnv"
SETTING = "tool-use"
SKILL = "data retrieval"

_FIRST = ["Acme", "Birch", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Indigo",
          "Juniper", "Kestrel", "Lumen", "Maple", "Nimbus", "Orchid", "Pioneer", "Quartz", "Raven"]
_LAST = ["Foods", "Labs", "Logistics", "Studio", "Supply", "Works", "Partners", "Systems"]
TODAY = 120
PAGE = 10


def _money(cents):
    return f"{cents / 100:.2f}"


def _five_percent(cents):
    """5% of an amount in cents, rounded half up to the cent (integer arithmetic, no float ties)."""
    return (cents * 5 + 50) // 100


class LedgerEnv(ToolEnv):
    LEVELS = 3  # level k: the first k steps (steps_for_level); level 1 names what step 1 acts on

    def declare_tools(self):
        customer = {"type": "string", "description": "customer id, e.g. C03"}
        return {
            "list_invoices": {
                "description": f"List invoices, {PAGE} per page, oldest due date first. "
                               f"'overdue' means open and due before day {TODAY} (today).",
                "parameters": {"type": "object", "required": ["status"], "properties": {
                    "status": {"type": "string", "enum": ["open", "overdue", "paid", "credited",
                                                          "all"]},
                    "page": {"type": "integer", "minimum": 1},
                    "customer_id": customer}},
            },
            "get_customer": {
                "description": "A customer's account: name, outstanding balance, flags, fee.",
                "parameters": {"type": "object", "required": ["customer_id"],
                               "properties": {"customer_id": customer}},
            },
            "flag_account": {
                "description": "Set or clear the collection flag on a customer's account.",
                "parameters": {"type": "object", "required": ["customer_id", "flagged"],
                               "properties": {"customer_id": customer,
                                              "flagged": {"type": "boolean"}}},
            },
            "credit_invoice": {
                "description": "Issue a credit note cancelling an open invoice; the customer's "
                               "balance drops by its amount.",
                "parameters": {"type": "object", "required": ["invoice_id", "reason"],
                               "properties": {"invoice_id": {"type": "string"},
                                              "reason": {"type": "string",
                                                         "enum": ["billing error", "goodwill",
                                                                  "duplicate"]}}},
            },
            "set_late_fee": {
                "description": "Set the late fee on a customer's account (replaces any earlier "
                               "fee); the fee is part of the outstanding balance.",
                "parameters": {"type": "object", "required": ["customer_id", "amount"],
                               "properties": {"customer_id": customer,
                                              "amount": {"type": "number", "minimum": 0}}},
            },
            "send_reminder": {
                "description": "Send a payment reminder to a customer.",
                "parameters": {"type": "object", "required": ["customer_id", "channel"],
                               "properties": {"customer_id": customer,
                                              "channel": {"type": "string",
                                                          "enum": ["email", "sms", "letter"]}}},
            },
            "convert_currency": {
                "description": "Convert an amount between currencies at today's rate.",
                "parameters": {"type": "object", "required": ["amount", "to"],
                               "properties": {"amount": {"type": "number"},
                                              "to": {"type": "string",
                                                     "enum": ["EUR", "GBP", "JPY"]}}},
            },
        }

    # -- state ------------------------------------------------------------------------------

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        names = rng.sample([f"{a} {b}" for a in _FIRST for b in _LAST], rng.randint(12, 18))
        self.customers = {f"C{i + 1:02d}": {"name": n, "carried": rng.randint(0, 40000),
                                            "flagged": False, "fee": 0}
                          for i, n in enumerate(names)}
        ids = list(self.customers)
        self.invoices = {}
        for _ in range(rng.randint(30, 46)):
            self._add_invoice(rng.choice(ids), rng.randint(2000, 250000), rng.randint(40, 180),
                              rng.choice(["open", "open", "paid"]))
        while len(self._overdue(self._worst_customer() or ids[0])) < 2:  # at most 4 more
            self._add_invoice(self._worst_customer() or rng.choice(ids),
                              rng.randint(2000, 250000), rng.randint(40, TODAY - 1), "open")
        self.target = self._worst_customer()
        self.target_invoice = max(self._overdue(self.target),
                                  key=lambda i: (self.invoices[i]["amount"], i))
        name = self.customers[self.target]["name"]
        return self.start(
            f"You work in accounts receivable. Today is day {TODAY}. The ledger has "
            f"{len(self.customers)} customers and {len(self.invoices)} invoices.",
            self.steps_for_level([
             Instruction("Find the customer with the most overdue invoices (ties: the lowest "
                         "customer id) and flag that account for collection."
                         + (f" It is {self.target} ({name})." if self.level == 1 else ""),
                         self._flag_done),
             Instruction(f"Credit {name}'s largest overdue invoice (reason: goodwill).",
                         self._credit_done),
             Instruction(f"Set a late fee on {name}'s account of 5% of the amount still "
                         "overdue after the credit, rounded half up to the cent. Then answer with the "
                         "account's new outstanding balance.", self._fee_done)]))

    def _add_invoice(self, customer_id, amount, due_day, status):
        self.invoices[f"INV-{1001 + len(self.invoices)}"] = {
            "customer_id": customer_id, "amount": amount, "due_day": due_day, "status": status}

    def _overdue(self, customer_id):
        return [i for i, v in self.invoices.items() if v["customer_id"] == customer_id
                and v["status"] == "open" and v["due_day"] < TODAY]

    def _worst_customer(self):
        counts = {c: len(self._overdue(c)) for c in self.customers}
        best = max(counts.values())
        return min(c for c, n in counts.items() if n == best) if best else None

    def _balance(self, customer_id):
        c = self.customers[customer_id]
        owed = sum(v["amount"] for v in self.invoices.values()
                   if v["customer_id"] == customer_id and v["status"] == "open")
        return c["carried"] + owed + c["fee"]

    def _expected_fee(self):
        return _five_percent(sum(self.invoices[i]["amount"] for i in self._overdue(self.target)))

    def _flag_done(self):
        return [c for c, v in self.customers.items() if v["flagged"]] == [self.target]

    def _credit_done(self):
        credited = [(i, v.get("reason")) for i, v in self.invoices.items()
                    if v["status"] == "credited"]
        return credited == [(self.target_invoice, "goodwill")]

    def _fee_done(self):
        fees = {c: v["fee"] for c, v in self.customers.items() if v["fee"]}
        return fees == {self.target: self._expected_fee()}

    def hint(self):
        name = self.customers[self.target]["name"]
        return (f"The account to chase is {self.target} ({name}). list_invoices takes a "
                "customer_id to show one customer's invoices; the fee is 5% of the overdue "
                "invoices left after the credit.")

    def expected_answer(self):
        return _money(self._balance(self.target))

    def solution(self):
        inv = self.invoices[self.target_invoice]
        remaining = sum(self.invoices[i]["amount"] for i in self._overdue(self.target)
                        if i != self.target_invoice)
        fee = _five_percent(remaining)
        balance = self._balance(self.target) - inv["amount"] + fee
        pages = -(-len([1 for v in self.invoices.values() if self._is_overdue(v)]) // PAGE)
        listing = "".join(self.reply_call("list_invoices", status="overdue", page=p)
                          for p in range(1, pages + 1))
        steps = [[listing, self.reply_call("flag_account", customer_id=self.target, flagged=True)],
                 [self.reply_call("credit_invoice", invoice_id=self.target_invoice,
                                  reason="goodwill")],
                 [self.reply_call("set_late_fee", customer_id=self.target, amount=fee / 100)]]
        return self.solution_for_level(steps, _money(balance))

    @staticmethod
    def _is_overdue(inv):
        return inv["status"] == "open" and inv["due_day"] < TODAY

    # -- tools ------------------------------------------------------------------------------

    def _customer(self, customer_id):
        if customer_id not in self.customers:
            raise ToolError(f"no customer {customer_id!r}; ids run from C01 to "
                            f"C{len(self.customers):02d}")
        return self.customers[customer_id]

    def tool_list_invoices(self, status, page=1, customer_id=None):
        if customer_id is not None:
            self._customer(customer_id)
        rows = []
        for inv_id, v in sorted(self.invoices.items(), key=lambda kv: (kv[1]["due_day"], kv[0])):
            shown = "overdue" if self._is_overdue(v) else v["status"]
            if status in (shown, "all") or (status == "open" and shown == "overdue"):
                if customer_id in (None, v["customer_id"]):
                    rows.append({"invoice": inv_id, "customer": v["customer_id"],
                                 "amount": _money(v["amount"]), "due_day": v["due_day"],
                                 "status": shown})
        pages = max(1, -(-len(rows) // PAGE))
        if page > pages:
            raise ToolError(f"page {page} does not exist; there are {pages} page(s)")
        chunk = rows[(page - 1) * PAGE: page * PAGE]
        return f"{status} invoices, page {page} of {pages} ({len(rows)} in all):\n" + \
            render_records(chunk)

    def tool_get_customer(self, customer_id):
        c = self._customer(customer_id)
        return render_record({"customer": customer_id, "name": c["name"],
                              "outstanding_balance": _money(self._balance(customer_id)),
                              "late_fee": _money(c["fee"]), "collection_flag": c["flagged"]})

    def tool_flag_account(self, customer_id, flagged):
        self._customer(customer_id)["flagged"] = flagged
        return f"{customer_id} collection flag is now {'on' if flagged else 'off'}."

    def tool_credit_invoice(self, invoice_id, reason):
        inv = self.invoices.get(invoice_id)
        if inv is None:
            raise ToolError(f"no invoice {invoice_id!r}")
        if inv["status"] != "open":
            raise ToolError(f"{invoice_id} is {inv['status']}; only open invoices can be credited")
        inv["status"], inv["reason"] = "credited", reason
        return (f"Credited {invoice_id} ({_money(inv['amount'])}, {reason}). "
                f"{inv['customer_id']} balance: {_money(self._balance(inv['customer_id']))}.")

    def tool_set_late_fee(self, customer_id, amount):
        self._customer(customer_id)["fee"] = round(amount * 100)
        return f"Late fee for {customer_id} set to {amount:.2f}."

    def tool_send_reminder(self, customer_id, channel):
        self._customer(customer_id)
        return f"Reminder queued to {customer_id} by {channel}."

    def tool_convert_currency(self, amount, to):
        rate = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.3}[to]
        return f"{amount:.2f} USD = {amount * rate:.2f} {to}"
