"""Business trip: book a flight for two, a hotel from the arrival day, and apply a voucher.

A travel desk sees 20-40 flights between six airports over five days and 10-20 hotels, drawn
from the seed, plus two travellers' profiles. The agent books the cheapest nonstop flight with
two free seats (the very cheapest has only one), books the best-rated hotel under a nightly
budget from the day the flight lands (overnight flights land the next day), applies the company
voucher to the more expensive booking, and reports the trip's total cost.

It exercises API orchestration: each call's output feeds the next call's input (traveller ids
into the nested passenger list, the arrival day into the hotel check-in, booking totals into the
voucher choice). Each step is judged from the bookings, so booking everything does not win, and
bookings can be cancelled. ``get_weather`` and ``list_lounges`` are never needed.
``reset(seed=None)`` plays seed 0.
"""

import random

from toolenv import Instruction, ToolEnv, ToolError, render_record, render_records

ENV_CLASS = "TravelEnv"
SETTING = "tool-use"
SKILL = "api orchestration"

_AIRPORTS = ["AMS", "BER", "CDG", "FCO", "LIS", "MAD"]
_HOTEL_WORDS = (["Grand", "Harbour", "Old Town", "Central", "Garden", "River", "Park", "Royal"],
                ["Hotel", "Inn", "Suites", "Residence", "Lodge"])
_NAMES = ["Alex Moreno", "Bea Lindqvist", "Chris Okoro", "Dana Weiss", "Elif Kaya", "Femi Adeyemi"]


def _money(cents):
    return f"{cents / 100:.2f}"


class TravelEnv(ToolEnv):
    LEVELS = 3  # level k: the first k steps (steps_for_level); level 1 names what step 1 acts on

    def declare_tools(self):
        airport = {"type": "string", "enum": _AIRPORTS}
        day = {"type": "integer", "minimum": 1, "maximum": 7}
        booking = {"type": "string", "description": "booking id, e.g. BK-301"}
        return {
            "get_traveller": {
                "description": "A traveller's profile: traveller id and company voucher code.",
                "parameters": {"type": "object", "required": ["name"],
                               "properties": {"name": {"type": "string"}}}},
            "search_flights": {
                "description": "Flights on a route and day, with price per seat, stops, free "
                               "seats and arrival day.",
                "parameters": {"type": "object", "required": ["origin", "destination", "day"],
                               "properties": {"origin": airport, "destination": airport,
                                              "day": day,
                                              "max_stops": {"type": "integer", "minimum": 0}}}},
            "book_flight": {
                "description": "Book seats on a flight for several passengers.",
                "parameters": {"type": "object", "required": ["flight_id", "passengers"],
                               "properties": {
                                   "flight_id": {"type": "string"},
                                   "passengers": {"type": "array", "minItems": 1, "items": {
                                       "type": "object", "required": ["name", "traveller_id"],
                                       "properties": {"name": {"type": "string"},
                                                      "traveller_id": {"type": "string"}}}}}}},
            "search_hotels": {
                "description": "Hotels in a city with rating and price per night.",
                "parameters": {"type": "object", "required": ["city"],
                               "properties": {"city": airport,
                                              "max_price": {"type": "number", "minimum": 0}}}},
            "book_hotel": {
                "description": "Book one room for a number of nights from a check-in day.",
                "parameters": {"type": "object",
                               "required": ["hotel_id", "check_in_day", "nights", "guests"],
                               "properties": {"hotel_id": {"type": "string"},
                                              "check_in_day": day,
                                              "nights": {"type": "integer", "minimum": 1},
                                              "guests": {"type": "integer", "minimum": 1,
                                                         "maximum": 4}}}},
            "get_booking": {"description": "A booking's details and total.",
                            "parameters": {"type": "object", "required": ["booking_id"],
                                           "properties": {"booking_id": booking}}},
            "cancel_booking": {"description": "Cancel a booking (full refund).",
                               "parameters": {"type": "object", "required": ["booking_id"],
                                              "properties": {"booking_id": booking}}},
            "apply_voucher": {"description": "Apply a voucher code (10% off) to one booking.",
                              "parameters": {"type": "object", "required": ["booking_id", "code"],
                                             "properties": {"booking_id": booking,
                                                            "code": {"type": "string"}}}},
            "get_weather": {"description": "Weather forecast for a city and day.",
                            "parameters": {"type": "object", "required": ["city", "day"],
                                           "properties": {"city": airport, "day": day}}},
            "list_lounges": {"description": "Airport lounges.",
                             "parameters": {"type": "object", "required": ["airport"],
                                            "properties": {"airport": airport}}},
        }

    # -- state ------------------------------------------------------------------------------

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.origin, self.dest = rng.sample(_AIRPORTS, 2)
        self.day, self.nights = rng.randint(1, 4), rng.randint(2, 4)
        self.budget = rng.randint(9, 16) * 1000
        names = rng.sample(_NAMES, 2)
        self.travellers = {n: {"id": f"T-{rng.randint(1000, 9999)}", "code": ""} for n in names}
        self.voucher = "TRIP-" + "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ", k=4))
        self.travellers[names[0]]["code"] = self.voucher
        self.names = names
        self._make_flights(rng)
        self._make_hotels(rng)
        self.bookings, self.next_booking = {}, rng.randint(200, 900)
        a, b = names
        return self.start(
            f"You are the travel desk. Travellers {a} and {b} fly from {self.origin} to "
            f"{self.dest}.",
            self.steps_for_level([
             Instruction(f"Book the cheapest nonstop flight from {self.origin} to {self.dest} on "
                         f"day {self.day} that has seats for both {a} and {b}, using their "
                         "traveller ids."
                         + (f" It is {self.flight}; their traveller ids are "
                            f"{self.travellers[a]['id']} and {self.travellers[b]['id']}."
                            if self.level == 1 else ""),
                         self._flight_done),
             Instruction(f"Book one room for both for {self.nights} nights in {self.dest}, "
                         "checking in on the day the flight lands, at the best-rated hotel "
                         f"costing at most {_money(self.budget)} per night (ties: the cheaper).",
                         self._hotel_done),
             Instruction(f"Apply the company voucher from {a}'s profile to the more expensive "
                         "of the two bookings. Then answer with the trip's total cost.",
                         self._voucher_done)]))

    def _make_flights(self, rng):
        # prices end in 3 cents, so a two-seat total never equals a whole-euro hotel total
        self.flights, prices = {}, rng.sample(range(6003, 40000, 10), rng.randint(20, 40))
        routes = [(o, d) for o in _AIRPORTS for d in _AIRPORTS if o != d]
        for k, price in enumerate(prices):
            origin, dest = rng.choice(routes) if k >= 4 else (self.origin, self.dest)
            self.flights[f"FL-{100 + 7 * k}"] = {
                "origin": origin, "destination": dest,
                "day": rng.randint(1, 5) if k >= 4 else self.day, "price": price,
                "stops": rng.choice([0, 0, 1]) if k >= 4 else [0, 0, 1, 0][k],
                "seats": rng.randint(0, 9), "overnight": rng.random() < 0.3}
        route = sorted((f for f, v in self.flights.items() if self._on_route(v) and not v["stops"]),
                       key=lambda f: self.flights[f]["price"])
        self.flights[route[0]]["seats"] = 1  # the cheapest nonstop cannot take two
        self.flights[route[1]]["seats"] = max(2, self.flights[route[1]]["seats"])
        self.flight = route[1]
        self.arrival = self.day + self.flights[self.flight]["overnight"]

    def _on_route(self, v):
        return (v["origin"], v["destination"], v["day"]) == (self.origin, self.dest, self.day)

    def _make_hotels(self, rng):
        self.hotels, names = {}, rng.sample([f"{a} {b}" for a in _HOTEL_WORDS[0]
                                             for b in _HOTEL_WORDS[1]], rng.randint(10, 20))
        prices = rng.sample(range(40, 250), len(names))  # distinct: "the cheaper" always decides
        if prices[0] * 100 > self.budget:  # at least one hotel in the city fits the budget
            prices[0] = rng.choice([p for p in range(40, self.budget // 100 + 1)
                                    if p not in prices])
        for k, name in enumerate(names):
            self.hotels[f"HT-{10 + k}"] = {
                "name": name, "city": self.dest if k < 5 else rng.choice(_AIRPORTS),
                "rating": rng.randint(30, 50) / 10, "price": prices[k] * 100,
                "rooms": rng.randint(1, 5)}
        fits = [h for h, v in self.hotels.items()
                if v["city"] == self.dest and v["price"] <= self.budget]
        self.hotel = min(fits, key=lambda h: (-self.hotels[h]["rating"], self.hotels[h]["price"], h))

    def _live(self, kind):
        return {k: v for k, v in self.bookings.items() if v["kind"] == kind and not v["cancelled"]}

    def _flight_done(self):
        live = list(self._live("flight").values())
        ids = sorted(t["id"] for t in self.travellers.values())
        return (len(live) == 1 and live[0]["item"] == self.flight
                and sorted(p["traveller_id"] for p in live[0]["passengers"]) == ids)

    def _hotel_done(self):
        live = list(self._live("hotel").values())
        return (len(live) == 1 and live[0]["item"] == self.hotel
                and (live[0]["check_in"], live[0]["nights"], live[0]["guests"])
                == (self.arrival, self.nights, 2))

    def _voucher_done(self):
        live = {k: v for k, v in self.bookings.items() if not v["cancelled"]}
        dearest = max(live, key=lambda k: (live[k]["total"], k))
        return [k for k, v in live.items() if v["discount"]] == [dearest]

    def _total(self):
        return sum(v["total"] - v["discount"] for v in self.bookings.values()
                   if not v["cancelled"])

    def hint(self):
        return (f"The flight to book is {self.flight}; it lands on day {self.arrival}. The "
                f"voucher code is on {self.names[0]}'s profile, and booking totals are in "
                "get_booking.")

    def expected_answer(self):
        return _money(self._total())

    def solution(self):
        a, b = self.names
        flight_total = 2 * self.flights[self.flight]["price"]
        hotel_total = self.nights * self.hotels[self.hotel]["price"]
        dearest = max(flight_total, hotel_total)
        dearest_id = f"BK-{self.next_booking + (hotel_total > flight_total)}"
        passengers = [{"name": n, "traveller_id": self.travellers[n]["id"]} for n in (a, b)]
        steps = [[self.reply_call("get_traveller", name=a)
                  + self.reply_call("get_traveller", name=b)
                  + self.reply_call("search_flights", origin=self.origin, destination=self.dest,
                                    day=self.day, max_stops=0),
                  self.reply_call("book_flight", flight_id=self.flight, passengers=passengers)],
                 [self.reply_call("search_hotels", city=self.dest, max_price=self.budget / 100),
                  self.reply_call("book_hotel", hotel_id=self.hotel, check_in_day=self.arrival,
                                  nights=self.nights, guests=2)],
                 [self.reply_call("apply_voucher", booking_id=dearest_id, code=self.voucher)]]
        total = flight_total + hotel_total - (dearest + 5) // 10
        return self.solution_for_level(steps, _money(total))

    # -- tools ------------------------------------------------------------------------------

    def tool_get_traveller(self, name):
        match = [n for n in self.travellers if n.lower() == name.strip().lower()]
        if not match:
            raise ToolError(f"no traveller named {name!r}")
        t = self.travellers[match[0]]
        return render_record({"name": match[0], "traveller_id": t["id"],
                              "voucher_code": t["code"] or "-"})

    def tool_search_flights(self, origin, destination, day, max_stops=9):
        rows = [{"flight": f, "price_per_seat": _money(v["price"]), "stops": v["stops"],
                 "free_seats": v["seats"], "lands_day": v["day"] + v["overnight"]}
                for f, v in sorted(self.flights.items(), key=lambda kv: kv[1]["price"])
                if (v["origin"], v["destination"], v["day"]) == (origin, destination, day)
                and v["stops"] <= max_stops]
        return f"{len(rows)} flight(s):\n" + render_records(rows)

    def _book(self, kind, item, total, **details):
        booking_id = f"BK-{self.next_booking + len(self.bookings)}"
        self.bookings[booking_id] = dict(kind=kind, item=item, total=total, discount=0,
                                         cancelled=False, **details)
        return booking_id

    def tool_book_flight(self, flight_id, passengers):
        v = self.flights.get(flight_id)
        if v is None:
            raise ToolError(f"no flight {flight_id!r}")
        known = {t["id"] for t in self.travellers.values()}
        for p in passengers:
            if p["traveller_id"] not in known:
                raise ToolError(f"unknown traveller id {p['traveller_id']!r}; see get_traveller")
        if len(passengers) > v["seats"]:
            raise ToolError(f"{flight_id} has only {v['seats']} free seat(s)")
        v["seats"] -= len(passengers)
        booking_id = self._book("flight", flight_id, v["price"] * len(passengers),
                                passengers=passengers)
        return f"{booking_id}: {len(passengers)} seat(s) on {flight_id}, total " \
               f"{_money(v['price'] * len(passengers))}."

    def tool_search_hotels(self, city, max_price=None):
        rows = [{"hotel": h, "name": v["name"], "rating": v["rating"],
                 "price_per_night": _money(v["price"]), "rooms_left": v["rooms"]}
                for h, v in sorted(self.hotels.items())
                if v["city"] == city and (max_price is None or v["price"] <= max_price * 100)]
        return f"{len(rows)} hotel(s):\n" + render_records(rows)

    def tool_book_hotel(self, hotel_id, check_in_day, nights, guests):
        v = self.hotels.get(hotel_id)
        if v is None:
            raise ToolError(f"no hotel {hotel_id!r}")
        if v["rooms"] < 1:
            raise ToolError(f"{hotel_id} is full")
        v["rooms"] -= 1
        booking_id = self._book("hotel", hotel_id, v["price"] * nights, check_in=check_in_day,
                                nights=nights, guests=guests)
        return f"{booking_id}: {v['name']}, {nights} night(s) from day {check_in_day}, total " \
               f"{_money(v['price'] * nights)}."

    def _booking(self, booking_id):
        b = self.bookings.get(booking_id)
        if b is None or b["cancelled"]:
            raise ToolError(f"no live booking {booking_id!r}")
        return b

    def tool_get_booking(self, booking_id):
        b = self._booking(booking_id)
        return render_record({"booking": booking_id, "type": b["kind"], "item": b["item"],
                              "total": _money(b["total"]), "discount": _money(b["discount"])})

    def tool_cancel_booking(self, booking_id):
        b = self._booking(booking_id)
        b["cancelled"] = True
        if b["kind"] == "flight":
            self.flights[b["item"]]["seats"] += len(b["passengers"])
        else:
            self.hotels[b["item"]]["rooms"] += 1
        return f"{booking_id} cancelled and refunded."

    def tool_apply_voucher(self, booking_id, code):
        b = self._booking(booking_id)
        if code.strip().upper() != self.voucher:
            raise ToolError("invalid voucher code")
        if any(v["discount"] for v in self.bookings.values() if not v["cancelled"]):
            raise ToolError("the voucher has already been used on this trip")
        b["discount"] = (b["total"] + 5) // 10
        return f"Voucher applied to {booking_id}: -{_money(b['discount'])}."

    def tool_get_weather(self, city, day):
        return f"{city}, day {day}: {['sunny', 'cloudy', 'rain'][(day + len(city)) % 3]}"

    def tool_list_lounges(self, airport):
        return f"{airport}: Skyline Lounge (terminal 1)"
