"""Team calendar: clear a cancelled event, schedule a meeting in the first common gap, add a late
invitee.

Six colleagues share a calendar of 12-35 events over three days, plus five meeting rooms, all
drawn from the seed. The agent cancels one event, books a one-hour meeting for three people at
the earliest hour all three are free on that day in the smallest free room seating four, then
adds a fourth person, who first has to be freed from a clashing event, and reports the meeting's
id.

The steps depend on each other: the cancelled event is what opens the earliest common hour (and
may free a room), and the fourth person's clash is only visible once the hour is known.
``book_meeting`` and ``add_attendee`` refuse clashes with a reason, so the agent can recover.
Each step is judged from the calendar: exactly the right cancellations and one meeting with the
right people, hour and room. ``get_timezone`` and ``send_message`` are never needed.
``reset(seed=None)`` plays seed 0.
"""

import random

from toolenv import Instruction, ToolEnv, ToolError, render_record, render_records

ENV_CLASS = "CalendarEnv"
SETTING = "tool-use"
SKILL = "multi-step workflows"

_PEOPLE = ["ana", "ben", "chen", "dara", "eli", "farah", "gus", "hana", "ivan", "jo"]
_TITLES = ["Standup", "1:1", "Design review", "Budget sync", "Customer call", "Hiring panel",
           "Roadmap", "Retro", "Lunch and learn", "Vendor demo", "Code review", "Offsite prep"]
_ROOMS = {"R1": 2, "R2": 4, "R3": 4, "R4": 6, "R5": 10}
DAYS, FIRST, LAST = (1, 2, 3), 9, 17


class CalendarEnv(ToolEnv):
    LEVELS = 3  # level k: the first k steps (steps_for_level); level 1 names what step 1 acts on

    def declare_tools(self):
        person = {"type": "string", "enum": self.people}
        day = {"type": "integer", "minimum": 1, "maximum": 3}
        event = {"type": "string", "description": "event id, e.g. EV-512"}
        return {
            "list_events": {
                "description": "A person's events, optionally on one day only.",
                "parameters": {"type": "object", "required": ["person"],
                               "properties": {"person": person, "day": day}},
            },
            "get_event": {
                "description": "One event's details.",
                "parameters": {"type": "object", "required": ["event_id"],
                               "properties": {"event_id": event}},
            },
            "list_rooms": {
                "description": "Rooms and their seats, with their bookings on a day.",
                "parameters": {"type": "object", "required": ["day"],
                               "properties": {"day": day,
                                              "min_seats": {"type": "integer", "minimum": 1}}},
            },
            "book_meeting": {
                "description": f"Book a one-hour meeting (hour {FIRST}-{LAST - 1}) in a room.",
                "parameters": {"type": "object",
                               "required": ["title", "attendees", "day", "hour", "room_id"],
                               "properties": {
                                   "title": {"type": "string", "minLength": 1},
                                   "attendees": {"type": "array", "items": person, "minItems": 1},
                                   "day": day,
                                   "hour": {"type": "integer", "minimum": FIRST,
                                            "maximum": LAST - 1},
                                   "room_id": {"type": "string", "enum": sorted(_ROOMS)}}},
            },
            "add_attendee": {
                "description": "Add a person to an existing meeting.",
                "parameters": {"type": "object", "required": ["event_id", "person"],
                               "properties": {"event_id": event, "person": person}},
            },
            "cancel_event": {
                "description": "Cancel an event for everyone.",
                "parameters": {"type": "object", "required": ["event_id"],
                               "properties": {"event_id": event}},
            },
            "get_timezone": {
                "description": "A person's time zone.",
                "parameters": {"type": "object", "required": ["person"],
                               "properties": {"person": person}},
            },
            "send_message": {
                "description": "Send a chat message to a person.",
                "parameters": {"type": "object", "required": ["person", "text"],
                               "properties": {"person": person, "text": {"type": "string"}}},
            },
        }

    # -- state ------------------------------------------------------------------------------

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.people = sorted(rng.sample(_PEOPLE, 6))
        self.events, self.next_id = {}, rng.randint(100, 800)
        for _ in range(rng.randint(14, 30)):
            length = rng.choice([1, 1, 2])
            self._add(rng.choice(_TITLES), rng.sample(self.people, rng.randint(1, 3)),
                      rng.choice(DAYS), rng.randint(FIRST, LAST - length), length,
                      rng.choice([None, *sorted(_ROOMS)]))
        self.day = rng.choice(DAYS)
        self.a, self.b, self.c, self.e = rng.sample(self.people, 4)
        self.hour = rng.randint(FIRST + 1, 13)
        self._arrange(rng)
        self.created = []
        names = ", ".join(self.people)
        return self.start(
            f"You manage a team calendar (days 1-3, working hours {FIRST}:00-{LAST}:00). "
            f"People: {names}. Rooms: "
            + ", ".join(f"{r} ({n} seats)" for r, n in _ROOMS.items()) + ".",
            self.steps_for_level([
             Instruction(f"{self.a}'s \"{self.events[self.blocker]['title']}\" on day "
                         f"{self.day} is called off: cancel it."
                         + (f" Its event id is {self.blocker}." if self.level == 1 else ""),
                         lambda: self._cancelled() == {self.blocker}),
             Instruction(f"Book a one-hour meeting titled \"Planning\" for {self.a}, {self.b} "
                         f"and {self.c} on day {self.day} at the earliest hour when all three "
                         "are free, in the smallest room free at that hour that seats four "
                         "(ties: lowest room id).", self._booked),
             Instruction(f"Add {self.e} to the Planning meeting; if {self.e} has another event "
                         "at that hour, cancel that event first. Then answer with the Planning "
                         "meeting's event id.", self._joined)]))

    def _add(self, title, attendees, day, hour, length, room):
        event_id = f"EV-{self.next_id}"
        self.next_id += 1
        self.events[event_id] = {"title": title, "attendees": list(attendees), "day": day,
                                 "hour": hour, "length": length, "room": room,
                                 "cancelled": False}
        return event_id

    def _at(self, day, hour, who=None, room=None):
        """Live events on ``day`` covering ``hour``, of a person and/or in a room."""
        return [k for k, v in self.events.items() if not v["cancelled"] and v["day"] == day
                and v["hour"] <= hour < v["hour"] + v["length"]
                and (who is None or who in v["attendees"]) and room in (None, v["room"])]

    def _arrange(self, rng):
        """Make the instance solvable in exactly one way: at self.hour only the blocker keeps
        a, b and c apart, every earlier hour someone of them is busy, e has one clash there,
        and a four-seat room is free then."""
        d, h, trio = self.day, self.hour, (self.a, self.b, self.c)
        for k in set(self._at(d, h, self.a) + self._at(d, h, self.b) + self._at(d, h, self.c)
                     + self._at(d, h, self.e)):
            del self.events[k]
        taken = {v["title"] for v in self.events.values()
                 if v["day"] == d and self.a in v["attendees"]}
        self.blocker = self._add(rng.choice([t for t in _TITLES if t not in taken]), [self.a],
                                 d, h, 1, rng.choice([None, "R2", "R3"]))
        self.clash = self._add(rng.choice(_TITLES), [self.e], d, h, 1, None)
        for hour in range(FIRST, h):
            if not any(self._at(d, hour, p) for p in trio):
                self._add(rng.choice(_TITLES), [rng.choice(trio)], d, hour, 1, None)
        for k in self._at(d, h, room="R5"):
            self.events[k]["room"] = None
        free = [r for r in sorted(_ROOMS, key=lambda r: (_ROOMS[r], r))
                if _ROOMS[r] >= 4 and not [k for k in self._at(d, h, room=r) if k != self.blocker]]
        self.room = free[0]

    def _cancelled(self):
        return {k for k, v in self.events.items() if v["cancelled"]}

    def _planning(self):
        live = [k for k in self.created if not self.events[k]["cancelled"]]
        return live[0] if len(live) == 1 else None

    def _booked(self):
        k = self._planning()
        v = self.events.get(k, {})
        return (k is not None and v["title"].strip().lower() == "planning"
                and sorted(v["attendees"]) == sorted([self.a, self.b, self.c])
                and (v["day"], v["hour"], v["room"]) == (self.day, self.hour, self.room))

    def _joined(self):
        k = self._planning()
        return (k is not None and self._cancelled() == {self.blocker, self.clash}
                and sorted(self.events[k]["attendees"]) == sorted([self.a, self.b, self.c, self.e]))

    def hint(self):
        return (f"The blocking event is {self.blocker}. Once it is gone, the three are all free "
                f"at {self.hour}:00; list_rooms shows which rooms are free then. add_attendee "
                f"refuses while {self.e} is busy.")

    def expected_answer(self):
        return self._planning() or "none"

    def solution(self):
        lookups = "".join(self.reply_call("list_events", person=p, day=self.day)
                          for p in (self.b, self.c))
        steps = [[self.reply_call("list_events", person=self.a, day=self.day),
                  self.reply_call("cancel_event", event_id=self.blocker)],
                 [lookups + self.reply_call("list_rooms", day=self.day, min_seats=4),
                  self.reply_call("book_meeting", title="Planning",
                                  attendees=[self.a, self.b, self.c], day=self.day, hour=self.hour,
                                  room_id=self.room)],
                 [self.reply_call("list_events", person=self.e, day=self.day),
                  self.reply_call("cancel_event", event_id=self.clash)
                  + self.reply_call("add_attendee", event_id=f"EV-{self.next_id}", person=self.e)]]
        return self.solution_for_level(steps, f"EV-{self.next_id}")

    # -- tools ------------------------------------------------------------------------------

    def _event(self, event_id):
        if event_id not in self.events or self.events[event_id]["cancelled"]:
            raise ToolError(f"no live event {event_id!r}")
        return self.events[event_id]

    def _row(self, k):
        v = self.events[k]
        return {"event": k, "title": v["title"], "day": v["day"],
                "time": f"{v['hour']}:00-{v['hour'] + v['length']}:00",
                "room": v["room"] or "-", "attendees": " ".join(v["attendees"])}

    def tool_list_events(self, person, day=None):
        rows = [self._row(k) for k, v in sorted(self.events.items(),
                                                key=lambda kv: (kv[1]["day"], kv[1]["hour"]))
                if not v["cancelled"] and person in v["attendees"] and day in (None, v["day"])]
        return f"{person}: {len(rows)} event(s)\n" + render_records(rows)

    def tool_get_event(self, event_id):
        self._event(event_id)
        return render_record(self._row(event_id))

    def tool_list_rooms(self, day, min_seats=1):
        rows = []
        for r, seats in _ROOMS.items():
            if seats >= min_seats:
                busy = sorted({(v["hour"], v["hour"] + v["length"]) for v in self.events.values()
                               if v["room"] == r and v["day"] == day and not v["cancelled"]})
                rows.append({"room": r, "seats": seats,
                             "booked": ", ".join(f"{a}:00-{b}:00" for a, b in busy) or "-"})
        return f"Rooms on day {day}:\n" + render_records(rows)

    def _check_free(self, person, day, hour):
        clash = self._at(day, hour, person)
        if clash:
            raise ToolError(f"{person} is busy at {hour}:00 on day {day} with {clash[0]} "
                            f"\"{self.events[clash[0]]['title']}\"")

    def tool_book_meeting(self, title, attendees, day, hour, room_id):
        if len(set(attendees)) != len(attendees):
            raise ToolError("an attendee is listed twice")
        if len(attendees) > _ROOMS[room_id]:
            raise ToolError(f"{room_id} seats {_ROOMS[room_id]}, not {len(attendees)}")
        for person in attendees:
            self._check_free(person, day, hour)
        taken = self._at(day, hour, room=room_id)
        if taken:
            raise ToolError(f"{room_id} is booked at {hour}:00 on day {day} by {taken[0]}")
        event_id = self._add(title, attendees, day, hour, 1, room_id)
        self.created.append(event_id)
        return f"Booked {event_id}: " + render_record(self._row(event_id))

    def tool_add_attendee(self, event_id, person):
        v = self._event(event_id)
        if person in v["attendees"]:
            raise ToolError(f"{person} already attends {event_id}")
        if v["room"] and len(v["attendees"]) >= _ROOMS[v["room"]]:
            raise ToolError(f"{v['room']} is full ({_ROOMS[v['room']]} seats)")
        for hour in range(v["hour"], v["hour"] + v["length"]):
            self._check_free(person, v["day"], hour)
        v["attendees"].append(person)
        return f"{person} added to {event_id}."

    def tool_cancel_event(self, event_id):
        self._event(event_id)["cancelled"] = True
        return f"{event_id} cancelled."

    def tool_get_timezone(self, person):
        return f"{person}: UTC+{self.people.index(person) % 3}"

    def tool_send_message(self, person, text):
        return f"Message sent to {person}."
