"""Warehouse inventory: book a customer return, re-order what runs low, receive the delivery.

A warehouse stocks 20-40 products from five suppliers in four categories, drawn from the seed.
The agent books a customer return against the right product (found by name), then raises one
purchase order with a supplier for every product of theirs in one category that is below its
reorder point, each topped up to twice the reorder point, receives that order, and reports the
category's total stock.

The steps are dependent: the returned product is one of that supplier's low items, and the
return lifts it above or towards its reorder point, which changes what must be ordered and how
much. ``create_purchase_order`` takes a nested list of ``{sku, quantity}`` items. Each step is
judged from the state (exactly the right stock movements and order lines), so guessing or
ordering everything does not win; a wrong order can be cancelled. ``get_supplier_rating`` and
``list_warehouses`` are never needed. ``reset(seed=None)`` plays seed 0.
"""

import random

from toolenv import Instruction, ToolEnv, ToolError, render_record, render_records

ENV_CLASS = "InventoryEnv"
SETTING = "tool-use"
SKILL = "state modification"

_CATEGORIES = {
    "tools": ["Hammer", "Wrench", "Pliers", "Drill Bit Set", "Tape Measure", "Level", "Saw"],
    "garden": ["Hose", "Rake", "Trowel", "Planter", "Sprinkler", "Shears", "Gloves"],
    "kitchen": ["Kettle", "Colander", "Whisk", "Skillet", "Ladle", "Cutting Board", "Grater"],
    "lighting": ["Desk Lamp", "LED Bulb", "Lantern", "Floor Lamp", "Night Light", "Spotlight"],
}
_ADJECTIVES = ["Classic", "Compact", "Heavy-Duty", "Pro", "Eco", "Deluxe", "Mini", "Steel"]
_SUPPLIERS = {"S1": "Northwind", "S2": "Blue Ridge", "S3": "Copperline", "S4": "Dunmore",
              "S5": "Eastgate"}


class InventoryEnv(ToolEnv):
    LEVELS = 3  # level k: the first k steps (steps_for_level); level 1 names what step 1 acts on

    def declare_tools(self):
        sku = {"type": "string", "description": "product code, e.g. SKU-117"}
        return {
            "search_products": {
                "description": "Find products by name fragment and/or category; optionally only "
                               "those below their reorder point.",
                "parameters": {"type": "object", "properties": {
                    "name_contains": {"type": "string"},
                    "category": {"type": "string", "enum": sorted(_CATEGORIES)},
                    "supplier_id": {"type": "string", "enum": sorted(_SUPPLIERS)},
                    "below_reorder_point": {"type": "boolean"}}},
            },
            "get_product": {
                "description": "One product's full record.",
                "parameters": {"type": "object", "required": ["sku"], "properties": {"sku": sku}},
            },
            "adjust_stock": {
                "description": "Change a product's stock by delta units (negative to remove).",
                "parameters": {"type": "object", "required": ["sku", "delta", "reason"],
                               "properties": {"sku": sku, "delta": {"type": "integer"},
                                              "reason": {"type": "string",
                                                         "enum": ["customer return", "damaged",
                                                                  "count correction"]}}},
            },
            "create_purchase_order": {
                "description": "Raise one purchase order with a supplier for several products.",
                "parameters": {"type": "object", "required": ["supplier_id", "items"],
                               "properties": {
                                   "supplier_id": {"type": "string", "enum": sorted(_SUPPLIERS)},
                                   "items": {"type": "array", "minItems": 1, "items": {
                                       "type": "object", "required": ["sku", "quantity"],
                                       "properties": {"sku": sku, "quantity": {
                                           "type": "integer", "minimum": 1}}}}}},
            },
            "cancel_purchase_order": {
                "description": "Cancel an open purchase order.",
                "parameters": {"type": "object", "required": ["po_id"],
                               "properties": {"po_id": {"type": "string"}}},
            },
            "receive_purchase_order": {
                "description": "Book the delivery of an open purchase order into stock.",
                "parameters": {"type": "object", "required": ["po_id"],
                               "properties": {"po_id": {"type": "string"}}},
            },
            "get_supplier_rating": {
                "description": "A supplier's on-time delivery rating.",
                "parameters": {"type": "object", "required": ["supplier_id"],
                               "properties": {"supplier_id": {"type": "string",
                                                              "enum": sorted(_SUPPLIERS)}}},
            },
            "list_warehouses": {"description": "The company's warehouses.", "parameters": {}},
        }

    # -- state ------------------------------------------------------------------------------

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        names = [(c, f"{a} {n}") for c, ns in _CATEGORIES.items() for n in ns for a in _ADJECTIVES]
        chosen = rng.sample(names, rng.randint(20, 40))
        codes = rng.sample(range(100, 1000), len(chosen))
        self.products = {}
        for (category, name), code in zip(chosen, codes):
            point = rng.randint(5, 30)
            self.products[f"SKU-{code}"] = {
                "name": name, "category": category, "supplier_id": rng.choice(sorted(_SUPPLIERS)),
                "stock": rng.randint(0, 3 * point), "reorder_point": point}
        self.category = rng.choice(sorted(_CATEGORIES))
        self.supplier = rng.choice(sorted(_SUPPLIERS))
        group = [s for s, p in sorted(self.products.items())
                 if p["category"] == self.category and p["supplier_id"] == self.supplier]
        while len(group) < 3:  # make sure the supplier has a few products in the category
            sku = rng.choice(sorted(s for s in self.products if s not in group))
            self.products[sku].update(category=self.category, supplier_id=self.supplier)
            group = sorted(group + [sku])
        for sku in rng.sample(group, 2):  # at least two of them run low
            self.products[sku]["stock"] = rng.randint(0, self.products[sku]["reorder_point"] - 1)
        self.returned = rng.choice([s for s in group if self._low(s)])
        self.return_qty = rng.randint(1, self.products[self.returned]["reorder_point"])
        self.start_stock = {s: p["stock"] for s, p in self.products.items()}
        self.adjustments, self.orders = [], {}
        self.next_po = rng.randint(300, 900)
        product = self.products[self.returned]["name"]
        supplier = _SUPPLIERS[self.supplier]
        return self.start(
            f"You run a warehouse with {len(self.products)} products. Suppliers: "
            + ", ".join(f"{k} {v}" for k, v in _SUPPLIERS.items()) + ".",
            self.steps_for_level([
             Instruction(f"A customer returned {self.return_qty} unit(s) of the \"{product}\" in "
                         "sellable condition. Book the return into stock."
                         + (f" Its sku is {self.returned}." if self.level == 1 else ""),
                         self._return_done),
             Instruction(f"Raise a single purchase order with {supplier} for every {self.category} "
                         f"product they supply that is now below its reorder point, ordering "
                         "for each the quantity that brings its stock to twice its reorder "
                         "point.", self._order_done),
             Instruction("Receive that purchase order into stock. Then answer with the total "
                         f"units in stock across all {self.category} products.",
                         self._received_done)]))

    def _low(self, sku):
        p = self.products[sku]
        return p["stock"] < p["reorder_point"]

    def _needed(self, stock):
        """{sku: quantity} to order given a stock table."""
        return {s: 2 * p["reorder_point"] - stock[s] for s, p in sorted(self.products.items())
                if p["category"] == self.category and p["supplier_id"] == self.supplier
                and stock[s] < p["reorder_point"]}

    def _return_done(self):
        return self.adjustments == [(self.returned, self.return_qty, "customer return")]

    def _open_orders(self):
        return {k: v for k, v in self.orders.items() if v["status"] != "cancelled"}

    def _order_done(self):
        stock = {s: p["stock"] for s, p in self.products.items()}
        wanted = (self.supplier, self._needed(stock))
        return [(o["supplier_id"], o["items"]) for o in self._open_orders().values()] == [wanted]

    def _received_done(self):
        return [o["status"] for o in self._open_orders().values()] == ["received"]

    def hint(self):
        return (f"The returned product is {self.returned}. After booking the return, "
                "search_products with supplier_id, category and below_reorder_point=true lists "
                "exactly the products to order.")

    def expected_answer(self):
        return str(sum(p["stock"] for p in self.products.values()
                       if p["category"] == self.category))

    def solution(self):
        stock = dict(self.start_stock)
        stock[self.returned] += self.return_qty
        items = self._needed(stock)
        total = sum(max(stock[s], 2 * p["reorder_point"]) if s in items else stock[s]
                    for s, p in self.products.items() if p["category"] == self.category)
        name = self.products[self.returned]["name"]
        steps = [[self.reply_call("search_products", name_contains=name),
                  self.reply_call("adjust_stock", sku=self.returned, delta=self.return_qty,
                                  reason="customer return")],
                 [self.reply_call("search_products", category=self.category,
                                  supplier_id=self.supplier, below_reorder_point=True),
                  self.reply_call("create_purchase_order", supplier_id=self.supplier,
                                  items=[{"sku": s, "quantity": q} for s, q in items.items()])],
                 [self.reply_call("receive_purchase_order", po_id=f"PO-{self.next_po}")]]
        return self.solution_for_level(steps, total)

    # -- tools ------------------------------------------------------------------------------

    def _product(self, sku):
        if sku not in self.products:
            raise ToolError(f"no product {sku!r}; use search_products to find codes")
        return self.products[sku]

    def _row(self, sku):
        p = self.products[sku]
        return {"sku": sku, "name": p["name"], "category": p["category"],
                "supplier": p["supplier_id"], "stock": p["stock"],
                "reorder_point": p["reorder_point"]}

    def tool_search_products(self, name_contains=None, category=None, supplier_id=None,
                             below_reorder_point=False):
        rows = [self._row(s) for s, p in sorted(self.products.items())
                if (name_contains is None or name_contains.lower() in p["name"].lower())
                and category in (None, p["category"]) and supplier_id in (None, p["supplier_id"])
                and (not below_reorder_point or self._low(s))]
        return f"{len(rows)} product(s):\n" + render_records(rows)

    def tool_get_product(self, sku):
        self._product(sku)
        return render_record(self._row(sku))

    def tool_adjust_stock(self, sku, delta, reason):
        p = self._product(sku)
        if p["stock"] + delta < 0:
            raise ToolError(f"{sku} has only {p['stock']} in stock; cannot remove {-delta}")
        p["stock"] += delta
        self.adjustments.append((sku, delta, reason))
        return f"{sku} stock {p['stock'] - delta} -> {p['stock']} ({reason})."

    def tool_create_purchase_order(self, supplier_id, items):
        lines = {}
        for item in items:
            if self._product(item["sku"])["supplier_id"] != supplier_id:
                raise ToolError(f"{item['sku']} is not supplied by {supplier_id}")
            if item["sku"] in lines:
                raise ToolError(f"{item['sku']} appears twice; give one line per product")
            lines[item["sku"]] = item["quantity"]
        po_id = f"PO-{self.next_po + len(self.orders)}"
        self.orders[po_id] = {"supplier_id": supplier_id, "items": dict(sorted(lines.items())),
                              "status": "open"}
        return f"Created {po_id} with {len(lines)} line(s), {sum(lines.values())} units."

    def _order(self, po_id):
        if po_id not in self.orders:
            raise ToolError(f"no purchase order {po_id!r}")
        if self.orders[po_id]["status"] != "open":
            raise ToolError(f"{po_id} is already {self.orders[po_id]['status']}")
        return self.orders[po_id]

    def tool_cancel_purchase_order(self, po_id):
        self._order(po_id)["status"] = "cancelled"
        return f"{po_id} cancelled."

    def tool_receive_purchase_order(self, po_id):
        order = self._order(po_id)
        for sku, qty in order["items"].items():
            self.products[sku]["stock"] += qty
        order["status"] = "received"
        return f"{po_id} received: " + ", ".join(f"{s} +{q}" for s, q in order["items"].items())

    def tool_get_supplier_rating(self, supplier_id):
        return f"{supplier_id}: {80 + int(supplier_id[1:]) * 3}% on time"

    def tool_list_warehouses(self):
        return "WH-1 Main (all products)"
