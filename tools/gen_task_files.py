#!/usr/bin/env python3
"""gen_task_files.py - small task files in llama-perplexity's three formats,
made from TinyStories text (goldens/tasks/; see its README).

    python3 tools/gen_task_files.py TINYSTORIES.txt OUT_DIR

Writes, deterministically (a fixed xorshift generator, no Python random):
  hellaswag-stories.txt       hellaswag_val_full.txt layout: 6 lines per task
                              (context, gold label 0..3, four endings); the
                              gold ending is the sentence that follows the
                              context in its story, the others are sentences
                              of other stories (often starting with the same
                              word, so the endings share tokens past the
                              context)
  winogrande-stories.csv      llama.cpp's winogrande CSV
                              (index,sentence,option1,option2,answer): a name
                              of the story replaced by "_", the other option
                              a name from another story; some blanks sit
                              right before the final punctuation, so the
                              continuation is short (llama-perplexity's
                              k_min_trailing_ctx rule); sentences with commas
                              are quoted as in the real file
  mc-stories.bin              llama.cpp's binary multiple-choice format:
                              u32 n_task, u32 offset of each task, then per
                              task the question, mc1 (answers + int32 labels,
                              one correct) and mc2 (the same answers, the
                              true one and one other marked correct); 2 to 4
                              answers per task
Only Python's standard library is used.
"""
import re
import struct
import sys

NAMES = ["Lily", "Tom", "Ben", "Sue", "Max", "Mia", "Tim", "Sam", "Anna", "Jack", "Lucy",
         "Sara", "Timmy", "Bob", "Mark", "Jane", "Amy", "Joe", "Kitty", "Spot", "Roxy", "Billy",
         "Molly", "Jenny", "Mom", "Zoe", "Leo", "Kate", "Ducky", "Pip"]


class Rng:
    """xorshift64*: the same numbers with every Python version."""

    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFFFFFFFFFF or 1

    def next(self):
        s = self.s
        s ^= (s >> 12)
        s ^= (s << 25) & 0xFFFFFFFFFFFFFFFF
        s ^= (s >> 27)
        self.s = s
        return (s * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return (self.next() >> 11) % n


def stories(path):
    text = open(path, encoding="utf-8").read()
    out = []
    for p in text.split("\n\n"):
        p = p.strip()
        if not p or "\n" in p:
            continue
        sents = [s.strip() for s in re.split(r'(?<=[.!?])\s+(?=[A-Z])', p) if s.strip()]
        out.append(sents)
    return out


def hellaswag(paras, rng, n_tasks):
    by_first = {}
    for pi, ss in enumerate(paras):
        for s in ss[1:]:
            by_first.setdefault(s.split()[0], []).append((pi, s))
    lines = []
    pi = 0
    while len(lines) < 6 * n_tasks:
        pi = (pi + 1 + rng.below(7)) % len(paras)
        ss = paras[pi]
        if len(ss) < 2 or len(ss[0]) > 160 or len(ss[1]) > 160 or '"' in ss[0] + ss[1]:
            continue
        true_end = ss[1]
        pool = by_first.get(true_end.split()[0], [])
        ends = []
        while len(ends) < 3:
            if pool and rng.below(2) == 0:
                opi, s = pool[rng.below(len(pool))]
            else:
                opi = rng.below(len(paras))
                oss = paras[opi]
                if len(oss) < 2:
                    continue
                s = oss[1 + rng.below(len(oss) - 1)]
            if opi == pi or s == true_end or s in ends or len(s) > 160 or '"' in s:
                continue
            ends.append(s)
        gold = rng.below(4)
        ends.insert(gold, true_end)
        lines += ["Story: " + ss[0], str(gold)] + ends
    return "".join(l + "\n" for l in lines)


def csv_field(s):
    return '"' + s + '"' if "," in s else s


def winogrande(paras, rng, n_tasks):
    rows = []
    pi = 0
    while len(rows) < n_tasks:
        pi = (pi + 1 + rng.below(5)) % len(paras)
        ss = paras[pi]
        for si in range(1, len(ss)):
            s = ss[si]
            if '"' in s or '_' in s or len(s) > 200:
                continue
            hits = [m for m in re.finditer(r"\b(%s)\b" % "|".join(NAMES), s) if m.start() > 0]
            if not hits:
                continue
            m = hits[rng.below(len(hits))]
            name = m.group(1)
            other = name
            while other == name:
                other = NAMES[rng.below(len(NAMES))]
            sentence = ss[si - 1] + " " + s[:m.start()] + "_" + s[m.end():]
            if '"' in sentence or len(sentence) > 300:
                continue
            answer = 1 + rng.below(2)
            opts = [name, other] if answer == 1 else [other, name]
            rows.append("%d,%s,%s,%s,%d" % (len(rows), csv_field(sentence), opts[0], opts[1], answer))
            break
    return "".join(r + "\n" for r in rows)


def mc_string(s):
    b = s.encode("utf-8")
    return struct.pack("<I", len(b)) + b


def mc_answers(answers, labels):
    out = struct.pack("<I", len(answers))
    for a in answers:
        out += mc_string(a)
    return out + struct.pack("<%di" % len(labels), *labels)


def multiple_choice(paras, rng, n_tasks):
    tasks = []
    pi = 0
    while len(tasks) < n_tasks:
        pi = (pi + 1 + rng.below(9)) % len(paras)
        ss = paras[pi]
        if len(ss) < 2 or len(ss[0]) > 200:
            continue
        n_ans = 2 + rng.below(3)
        answers = []
        while len(answers) < n_ans - 1:
            oss = paras[rng.below(len(paras))]
            s = oss[rng.below(len(oss))]
            if s != ss[1] and s not in answers and len(s) < 200:
                answers.append(s)
        gold = rng.below(n_ans)
        answers.insert(gold, ss[1])
        mc1 = [1 if i == gold else 0 for i in range(n_ans)]
        mc2 = list(mc1)
        mc2[(gold + 1) % n_ans] = 1
        tasks.append(mc_string("Story: " + ss[0]) + mc_answers(answers, mc1) + mc_answers(answers, mc2))
    head = 4 + 4 * len(tasks)
    offs, pos = [], head
    for t in tasks:
        offs.append(pos)
        pos += len(t)
    return struct.pack("<I", len(tasks)) + struct.pack("<%dI" % len(offs), *offs) + b"".join(tasks)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gen_task_files.py TINYSTORIES.txt OUT_DIR")
    paras = stories(sys.argv[1])
    out = sys.argv[2]
    with open(out + "/hellaswag-stories.txt", "w", encoding="utf-8", newline="\n") as f:
        f.write(hellaswag(paras, Rng(21), 120))
    with open(out + "/winogrande-stories.csv", "w", encoding="utf-8", newline="\n") as f:
        f.write(winogrande(paras, Rng(22), 150))
    with open(out + "/mc-stories.bin", "wb") as f:
        f.write(multiple_choice(paras, Rng(23), 120))


if __name__ == "__main__":
    main()
