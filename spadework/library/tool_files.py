"""File-system housekeeping: compress the big logs, archive them, delete the largest leftover.

A small server's disk holds 20-31 files under /logs, /data, /tmp, /home and /archive, with sizes
and dates drawn from the seed. The agent compresses every ``.log`` file in /logs above a size
threshold, moves the resulting ``.gz`` files to /archive, deletes the largest file left in /logs,
and reports the total size of /archive.

It exercises tool selection: ``find_files`` filters by directory, extension and size in one call
where ``list_dir`` and ``stat`` take many; ``disk_usage`` answers the final question directly;
``chmod`` and ``checksum`` never help. The steps are dependent (which files exist and which is the
largest depend on what was compressed and moved), and each is judged from the file tree, so
compressing, moving or deleting everything does not win. ``reset(seed=None)`` plays seed 0.
Level k plays the first k steps; level 1 has one file above the threshold and names it (the base
0.5B agent won 0 of 5 plays with two to four to compress).
"""

import random

from toolenv import Instruction, ToolEnv, ToolError, render_record, render_records

ENV_CLASS = "FileSystemEnv"
SETTING = "tool-use"
SKILL = "tool selection"

_DIRS = ["/archive", "/data", "/home/ana", "/home/ben", "/logs", "/tmp"]
_RATIO = {".log": 18, ".csv": 35, ".json": 30, ".txt": 40}  # compressed size, % of original


def _ext(path):
    name = path.rsplit("/", 1)[-1]
    return name[name.rfind("."):] if "." in name else ""


def _parent(path):
    return path.rsplit("/", 1)[0]


class FileSystemEnv(ToolEnv):
    LEVELS = 3  # level k: the first k steps (steps_for_level); level 1 names what step 1 acts on

    def declare_tools(self):
        path = {"type": "string", "description": "absolute path, e.g. /logs/app-1.log"}
        directory = {"type": "string", "enum": _DIRS}
        return {
            "list_dir": {"description": "Names in one directory (no sizes).",
                         "parameters": {"type": "object", "required": ["directory"],
                                        "properties": {"directory": directory}}},
            "stat": {"description": "Size in KB, last-modified day and owner of one file.",
                     "parameters": {"type": "object", "required": ["path"],
                                    "properties": {"path": path}}},
            "find_files": {
                "description": "Files in a directory with size and date, filtered by extension "
                               "and/or minimum size (strictly larger than min_size_kb).",
                "parameters": {"type": "object", "required": ["directory"], "properties": {
                    "directory": directory,
                    "extension": {"type": "string", "description": "e.g. .log"},
                    "min_size_kb": {"type": "integer", "minimum": 0}}}},
            "compress": {"description": "Compress a file to <path>.gz; the original is removed.",
                         "parameters": {"type": "object", "required": ["path"],
                                        "properties": {"path": path}}},
            "move": {"description": "Move a file into another directory.",
                     "parameters": {"type": "object", "required": ["path", "to_directory"],
                                    "properties": {"path": path, "to_directory": directory}}},
            "delete": {"description": "Delete a file.",
                       "parameters": {"type": "object", "required": ["path"],
                                      "properties": {"path": path}}},
            "disk_usage": {"description": "Total size in KB and file count of a directory.",
                           "parameters": {"type": "object", "required": ["directory"],
                                          "properties": {"directory": directory}}},
            "chmod": {"description": "Change a file's permission bits.",
                      "parameters": {"type": "object", "required": ["path", "mode"],
                                     "properties": {"path": path,
                                                    "mode": {"type": "string",
                                                             "enum": ["600", "644", "755"]}}}},
            "checksum": {"description": "SHA-256 of a file's contents.",
                         "parameters": {"type": "object", "required": ["path"],
                                        "properties": {"path": path}}},
        }

    # -- state ------------------------------------------------------------------------------

    def reset(self, seed=None):
        rng = random.Random(0 if seed is None else seed)
        self.files = {}
        logs = rng.sample(["app", "worker", "api", "cron", "auth", "db", "mail", "proxy", "queue",
                           "search", "billing", "audit"], rng.randint(6, 10))
        for name in logs:
            self._put(f"/logs/{name}.log", rng.randint(20, 5000), rng, "root")
        for name in rng.sample(["notes.txt", "rotate.txt", "pids.json", "errors.csv"], 2):
            self._put(f"/logs/{name}", rng.randint(5, 3000), rng, "root")
        for name in rng.sample(["sales", "users", "events", "prices", "stock", "visits"], 4):
            self._put(f"/data/{name}{rng.choice(['.csv', '.json'])}", rng.randint(100, 9000), rng,
                      "etl")
        for k in range(rng.randint(3, 8)):
            self._put(f"/tmp/cache-{k}.txt", rng.randint(1, 800), rng, "www")
        for user in ("ana", "ben"):
            for name in rng.sample(["todo.txt", "draft.txt", "budget.csv", "plan.json"], 2):
                self._put(f"/home/{user}/{name}", rng.randint(1, 400), rng, user)
        for k in range(rng.randint(1, 3)):
            self._put(f"/archive/old-{k}.log.gz", rng.randint(10, 900), rng, "root")
        sizes = sorted(v["size"] for p, v in self.files.items() if p.startswith("/logs/")
                       and _ext(p) == ".log")
        # 2 to 4 files above the threshold; at level 1 one, so that step 1 is one compress call
        cut = len(sizes) - 1 if self.level == 1 else rng.randint(len(sizes) - 4, len(sizes) - 2)
        while cut > 1 and sizes[cut - 1] == sizes[cut]:  # a tie at the cut would leave none above
            cut -= 1
        self.threshold = (sizes[cut - 1] + sizes[cut]) // 2
        self.big = sorted(p for p in self._in("/logs") if _ext(p) == ".log"
                          and self.files[p]["size"] > self.threshold)
        rest = [p for p in self._in("/logs") if p not in self.big]
        self.victim = min(rest, key=lambda p: (-self.files[p]["size"], p))
        self.initial = {p: dict(v) for p, v in self.files.items()}
        self.compressed, self.deleted = [], []
        return self.start(
            f"You are cleaning up a server's disk. Directories: {', '.join(_DIRS)}.",
            self.steps_for_level([
             Instruction(f"Compress every .log file in /logs larger than {self.threshold} KB "
                         "(leave the smaller ones as they are)."
                         + (f" They are {', '.join(self.big)}." if self.level == 1 else ""),
                         self._compress_done),
             Instruction("Move all the .gz files now in /logs into /archive.", self._move_done),
             Instruction("Delete the largest file left in /logs (ties: the first by name). "
                         "Then answer with the total size of /archive in KB.",
                         lambda: self.deleted == [self.victim])]))

    def _put(self, path, size, rng, owner):
        self.files[path] = {"size": size, "day": rng.randint(1, 90), "owner": owner}

    def _in(self, directory):
        return sorted(p for p in self.files if _parent(p) == directory)

    @staticmethod
    def _gz_size(path, size):
        return max(1, size * _RATIO.get(_ext(path), 90) // 100)

    def _compress_done(self):
        return self.compressed == self.big and self.deleted == []

    def _move_done(self):
        moved = [f"/archive/{p.rsplit('/', 1)[1]}.gz" for p in self.big]
        return (not [p for p in self._in("/logs") if p.endswith(".gz")]
                and all(p in self.files for p in moved))

    def hint(self):
        return (f"{len(self.big)} log files are above the threshold. find_files with extension "
                "and min_size_kb lists them in one call, and disk_usage on /archive gives its "
                "total.")

    def expected_answer(self):
        return str(sum(self.files[p]["size"] for p in self._in("/archive")))

    def solution(self):
        total = sum(v["size"] for p, v in self.initial.items() if _parent(p) == "/archive")
        total += sum(self._gz_size(p, self.initial[p]["size"]) for p in self.big)
        steps = [[self.reply_call("find_files", directory="/logs", extension=".log",
                                  min_size_kb=self.threshold),
                  "".join(self.reply_call("compress", path=p) for p in self.big)],
                 ["".join(self.reply_call("move", path=f"{p}.gz", to_directory="/archive")
                          for p in self.big)],
                 [self.reply_call("find_files", directory="/logs"),
                  self.reply_call("delete", path=self.victim)]]
        return self.solution_for_level(steps, total)

    # -- tools ------------------------------------------------------------------------------

    def _file(self, path):
        if path not in self.files:
            hint = "" if _parent(path) in _DIRS else f"; directories: {', '.join(_DIRS)}"
            raise ToolError(f"no such file: {path}{hint}")
        return self.files[path]

    def tool_list_dir(self, directory):
        names = [p.rsplit("/", 1)[1] for p in self._in(directory)]
        return f"{directory}: " + (" ".join(names) or "(empty)")

    def tool_stat(self, path):
        f = self._file(path)
        return render_record({"path": path, "size_kb": f["size"], "modified_day": f["day"],
                              "owner": f["owner"]})

    def tool_find_files(self, directory, extension=None, min_size_kb=0):
        rows = [{"path": p, "size_kb": self.files[p]["size"], "modified_day": self.files[p]["day"]}
                for p in self._in(directory) if self.files[p]["size"] > min_size_kb
                and (extension is None or p.endswith(extension))]
        return f"{len(rows)} file(s):\n" + render_records(rows)

    def tool_compress(self, path):
        f = self._file(path)
        if path.endswith(".gz"):
            raise ToolError(f"{path} is already compressed")
        del self.files[path]
        self.files[path + ".gz"] = dict(f, size=self._gz_size(path, f["size"]))
        self.compressed = sorted(self.compressed + [path])
        return f"{path} ({f['size']} KB) -> {path}.gz ({self.files[path + '.gz']['size']} KB)"

    def tool_move(self, path, to_directory):
        f = self._file(path)
        target = f"{to_directory}/{path.rsplit('/', 1)[1]}"
        if target in self.files:
            raise ToolError(f"{target} already exists")
        del self.files[path]
        self.files[target] = f
        return f"Moved {path} -> {target}"

    def tool_delete(self, path):
        self._file(path)
        del self.files[path]
        self.deleted.append(path)
        return f"Deleted {path}"

    def tool_disk_usage(self, directory):
        paths = self._in(directory)
        return (f"{directory}: {sum(self.files[p]['size'] for p in paths)} KB in "
                f"{len(paths)} file(s)")

    def tool_chmod(self, path, mode):
        self._file(path)
        return f"{path} mode set to {mode}"

    def tool_checksum(self, path):
        f = self._file(path)
        return f"{(f['size'] * 2654435761 + f['day']) % 16 ** 12:012x}"
