"""Order fulfilment with failures: release a held order, re-route it, ship with a working carrier.

An online shop has 15-30 orders and four carriers, drawn from the seed. A customer has moved; the
agent must update the delivery city of their order, which is on hold for address verification
(the tool refuses until the hold is released with the code found in the order's notes), then
buy a label from the cheapest carrier that can deliver there (the cheapest quote is from a
carrier that turns out not to serve the city, so the first attempt fails), ship the order with
that label and report its tracking number.

It exercises error recovery: every failure comes back as a tool result that says what went
wrong, and a wrong label can be voided. Each step is judged from the state (city, live labels,
shipment), so buying labels from everyone does not win. ``refund_order`` and
``escalate_to_support`` are never needed. ``reset(seed=None)`` plays seed 0.
"""

import random

from toolenv import Instruction, ToolEnv, ToolError, render_record, render_records

ENV_CLASS = "ShippingEnv"
SETTING = "tool-use"
SKILL = "error recovery"

_CITIES = ["Aberdeen", "Bristol", "Cardiff", "Dover", "Exeter", "Leeds", "Norwich", "York"]
_CUSTOMERS = ["Ada Shaw", "Ben Ortiz", "Cleo Park", "Dev Mehta", "Eva Lind", "Finn Walsh",
              "Gia Russo", "Hugo Brandt", "Iris Novak", "Jon Okafor", "Kai Berg", "Lena Vogel",
              "Milo Grant", "Nora Quinn", "Omar Haddad", "Pia Costa", "Ravi Iyer", "Sara Kim",
              "Tom Reyes", "Uma Das", "Vic Moreau", "Wren Hale", "Yara Saleh", "Zoe Adler",
              "Abe Lowe", "Bea Fox", "Cal Moss", "Dina Roth", "Eli Stone", "Fay Wu"]
_CARRIERS = ["Swiftpost", "Parcelwise", "RoadRunner", "Kitebox"]
_CODE_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


class ShippingEnv(ToolEnv):
    LEVELS = 3  # level k: the first k steps (steps_for_level); level 1 names what step 1 acts on

    def declare_tools(self):
        order = {"type": "string", "description": "order id, e.g. ORD-4821"}
        return {
            "list_orders": {
                "description": "Orders with customer, city and status.",
                "parameters": {"type": "object", "required": ["status"], "properties": {
                    "status": {"type": "string",
                               "enum": ["pending", "on_hold", "shipped", "all"]}}}},
            "get_order": {"description": "One order's details.",
                          "parameters": {"type": "object", "required": ["order_id"],
                                         "properties": {"order_id": order}}},
            "get_order_notes": {"description": "Internal notes on an order.",
                                "parameters": {"type": "object", "required": ["order_id"],
                                               "properties": {"order_id": order}}},
            "release_hold": {"description": "Release a hold on an order with its code.",
                             "parameters": {"type": "object", "required": ["order_id", "code"],
                                            "properties": {"order_id": order,
                                                           "code": {"type": "string"}}}},
            "update_address": {"description": "Change an order's delivery city.",
                               "parameters": {"type": "object", "required": ["order_id", "city"],
                                              "properties": {"order_id": order,
                                                             "city": {"type": "string",
                                                                      "enum": _CITIES}}}},
            "get_rates": {"description": "Carrier quotes for delivering an order to its city.",
                          "parameters": {"type": "object", "required": ["order_id"],
                                         "properties": {"order_id": order}}},
            "create_label": {"description": "Buy a shipping label from a carrier.",
                             "parameters": {"type": "object", "required": ["order_id", "carrier"],
                                            "properties": {"order_id": order,
                                                           "carrier": {"type": "string",
                                                                       "enum": _CARRIERS}}}},
            "void_label": {"description": "Void an unused label (refunded).",
                           "parameters": {"type": "object", "required": ["label_id"],
                                          "properties": {"label_id": {"type": "string"}}}},
            "ship_order": {"description": "Hand an order to its carrier with a label.",
                           "parameters": {"type": "object", "required": ["order_id", "label_id"],
                                          "properties": {"order_id": order,
                                                         "label_id": {"type": "string"}}}},
            "refund_order": {"description": "Refund an order in full and cancel it.",
                             "parameters": {"type": "object", "required": ["order_id"],
                                            "properties": {"order_id": order}}},
            "escalate_to_support": {
                "description": "Open a ticket with the support team.",
                "parameters": {"type": "object", "required": ["order_id", "message"],
                               "properties": {"order_id": order, "message": {"type": "string"}}}},
        }

    # -- state ------------------------------------------------------------------------------

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        customers = rng.sample(_CUSTOMERS, rng.randint(15, 30))
        numbers = rng.sample(range(1000, 10000), len(customers))
        self.orders = {}
        for name, number in zip(customers, numbers):
            status = rng.choice(["pending", "pending", "shipped", "on_hold"])
            self.orders[f"ORD-{number}"] = {
                "customer": name, "city": rng.choice(_CITIES), "weight": rng.randint(1, 30),
                "status": status, "code": "".join(rng.choices(_CODE_CHARS, k=5)),
                "refunded": False}
        self.target = rng.choice(sorted(self.orders))
        order = self.orders[self.target]
        order["status"] = "on_hold"
        self.new_city = rng.choice([c for c in _CITIES if c != order["city"]])
        prices = []
        while len(set(prices)) < len(_CARRIERS):  # distinct quotes: "cheapest" is unambiguous
            self.rates = {c: (rng.randint(300, 900), rng.randint(20, 90)) for c in _CARRIERS}
            prices = [self._price(c, self.target, self.new_city) for c in _CARRIERS]
        self.unserved = {c: set(rng.sample(_CITIES, 2)) for c in _CARRIERS}
        ranked = sorted(_CARRIERS, key=lambda c: (self._price(c, self.target, self.new_city), c))
        for c in _CARRIERS:  # the cheapest does not serve the new city; the runner-up does
            self.unserved[c].discard(self.new_city)
        self.unserved[ranked[0]].add(self.new_city)
        self.carrier = ranked[1]
        self.labels, self.tracking_base = {}, rng.randint(10 ** 8, 10 ** 9 - 1)
        return self.start(
            f"You handle fulfilment for an online shop with {len(self.orders)} orders. "
            f"Carriers: {', '.join(_CARRIERS)}.",
            self.steps_for_level([
             Instruction(f"{order['customer']} has moved to {self.new_city}: update the delivery "
                         "city of their order."
                         + (f" It is {self.target}, on hold; its release code is "
                            f"{order['code']}." if self.level == 1 else ""),
                         lambda: self.orders[self.target]["city"] == self.new_city),
             Instruction("Buy a label for that order from the cheapest carrier that can deliver "
                         "it to the new city.", self._label_done),
             Instruction("Ship the order with that label. Then answer with its tracking number.",
                         lambda: self.orders[self.target]["status"] == "shipped")]))

    def _price(self, carrier, order_id, city):
        base, per_kg = self.rates[carrier]
        zone = 150 * (_CITIES.index(city) % 3)
        return base + per_kg * self.orders[order_id]["weight"] + zone

    def _live_labels(self, order_id):
        return [k for k, v in self.labels.items() if v["order_id"] == order_id and not v["void"]]

    def _label_done(self):
        live = [self.labels[k]["carrier"] for k in self._live_labels(self.target)]
        return live == [self.carrier] and not any(
            self._live_labels(o) for o in self.orders if o != self.target)

    def hint(self):
        cheapest = min((c for c in self.unserved if self.new_city in self.unserved[c]))
        return (f"The order is {self.target}; its release code is in get_order_notes. "
                f"{cheapest} does not deliver to {self.new_city}.")

    def expected_answer(self):
        label = self.orders[self.target].get("label")
        return self.labels[label]["tracking"] if label else "none"

    def solution(self):
        t = self.target
        steps = [[self.reply_call("list_orders", status="on_hold"),
                  self.reply_call("get_order_notes", order_id=t),
                  self.reply_call("release_hold", order_id=t, code=self.orders[t]["code"])
                  + self.reply_call("update_address", order_id=t, city=self.new_city)],
                 [self.reply_call("get_rates", order_id=t),
                  self.reply_call("create_label", order_id=t, carrier=self.carrier)],
                 [self.reply_call("ship_order", order_id=t, label_id="LBL-1")]]
        return self.solution_for_level(steps, f"TRK{self.tracking_base}")

    # -- tools ------------------------------------------------------------------------------

    def _order(self, order_id):
        if order_id not in self.orders or self.orders[order_id]["refunded"]:
            raise ToolError(f"no open order {order_id!r}; list_orders shows the ids")
        return self.orders[order_id]

    def _row(self, order_id):
        o = self.orders[order_id]
        return {"order": order_id, "customer": o["customer"], "city": o["city"],
                "weight_kg": o["weight"], "status": o["status"]}

    def tool_list_orders(self, status):
        rows = [self._row(k) for k, o in sorted(self.orders.items())
                if not o["refunded"] and status in ("all", o["status"])]
        return f"{len(rows)} order(s):\n" + render_records(rows)

    def tool_get_order(self, order_id):
        self._order(order_id)
        return render_record(self._row(order_id))

    def tool_get_order_notes(self, order_id):
        o = self._order(order_id)
        if o["status"] != "on_hold":
            return "No notes."
        return (f"Held for address verification. Customer confirmed by phone; release code "
                f"{o['code']}.")

    def tool_release_hold(self, order_id, code):
        o = self._order(order_id)
        if o["status"] != "on_hold":
            raise ToolError(f"{order_id} is not on hold")
        if code.strip().upper() != o["code"]:
            raise ToolError("wrong release code; it is in the order's notes")
        o["status"] = "pending"
        return f"Hold released; {order_id} is pending."

    def tool_update_address(self, order_id, city):
        o = self._order(order_id)
        if o["status"] == "on_hold":
            raise ToolError(f"{order_id} is on hold for address verification; release it first "
                            "with release_hold(order_id, code), the code is in the order notes")
        if o["status"] == "shipped":
            raise ToolError(f"{order_id} has already shipped")
        o["city"] = city
        return f"{order_id} will be delivered to {city}."

    def tool_get_rates(self, order_id):
        o = self._order(order_id)
        rows = sorted(({"carrier": c, "price": f"{self._price(c, order_id, o['city']) / 100:.2f}"}
                       for c in _CARRIERS), key=lambda r: (float(r["price"]), r["carrier"]))
        return f"Quotes to {o['city']}:\n" + render_records(rows)

    def tool_create_label(self, order_id, carrier):
        o = self._order(order_id)
        if o["status"] != "pending":
            raise ToolError(f"{order_id} is {o['status']}; labels are for pending orders only")
        if o["city"] in self.unserved[carrier]:
            raise ToolError(f"{carrier} does not deliver to {o['city']}; choose another carrier")
        label_id = f"LBL-{len(self.labels) + 1}"
        self.labels[label_id] = {"order_id": order_id, "carrier": carrier, "void": False,
                                 "tracking": f"TRK{self.tracking_base + len(self.labels)}"}
        return f"{label_id} bought from {carrier} for {order_id}."

    def _label(self, label_id):
        if label_id not in self.labels or self.labels[label_id]["void"]:
            raise ToolError(f"no valid label {label_id!r}")
        return self.labels[label_id]

    def tool_void_label(self, label_id):
        label = self._label(label_id)
        if self.orders[label["order_id"]].get("label") == label_id:
            raise ToolError(f"{label_id} has been used to ship; it cannot be voided")
        label["void"] = True
        return f"{label_id} voided and refunded."

    def tool_ship_order(self, order_id, label_id):
        o, label = self._order(order_id), self._label(label_id)
        if label["order_id"] != order_id:
            raise ToolError(f"{label_id} belongs to {label['order_id']}")
        if o["status"] != "pending":
            raise ToolError(f"{order_id} is {o['status']}")
        o["status"], o["label"] = "shipped", label_id
        return f"{order_id} shipped with {label['carrier']}, tracking {label['tracking']}."

    def tool_refund_order(self, order_id):
        self._order(order_id)["refunded"] = True
        return f"{order_id} refunded and cancelled."

    def tool_escalate_to_support(self, order_id, message):
        self._order(order_id)
        return f"Ticket opened for {order_id}."
