#!/usr/bin/env python3
"""Writes differential_cases.json: random corpora (mixed case, Unicode punctuation
and symbols, Greek sigma, CJK, odd whitespace, 1-3 references) scored by a direct
Python transcription of sacreBLEU 2.x's BLEU and chrF code (Python's str.lower,
str.split and the `regex` module, as sacreBLEU uses them).

Run: python3 tests/results/data/gen_differential_cases.py > tests/results/data/differential_cases.json
"""
import math, random, json, re, regex
from collections import Counter
import re, regex, json
def t13a(line):
    line = line.replace('<skipped>', '').replace('-\n', '').replace('\n', ' ')
    if '&' in line:
        line = line.replace('&quot;', '"').replace('&amp;', '&').replace('&lt;', '<').replace('&gt;', '>')
    line = f' {line} '
    for r, rep in [(re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
                   (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
                   (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
                   (re.compile(r'([0-9])(-)'), r'\1 \2 ')]:
        line = r.sub(rep, line)
    return ' '.join(line.split())
def intl(line):
    for r, rep in [(regex.compile(r'(\P{N})(\p{P})'), r'\1 \2 '),
                   (regex.compile(r'(\p{P})(\P{N})'), r' \1 \2'),
                   (regex.compile(r'(\p{S})'), r' \1 ')]:
        line = r.sub(rep, line)
    return ' '.join(line.split())
def tok(name, s):
    return {'13a': t13a, 'intl': intl, 'none': lambda x: x, 'char': lambda x: ' '.join(x)}[name](s)
def ngrams(line, n):
    toks = line.split(); c = Counter()
    for k in range(1, n+1):
        for i in range(len(toks)-k+1): c[tuple(toks[i:i+k])] += 1
    return c, len(toks)
def my_log(x): return -9999999999 if x == 0 else math.log(x)
def bleu_stats(h, refs, o):
    pre = lambda s: tok(o['tok'], (s.lower() if o['lc'] else s).rstrip())
    rn = None; rl = []
    for r in refs:
        c, l = ngrams(pre(r), 4); rl.append(l)
        if rn is None: rn = c
        else:
            for k, v in c.items(): rn[k] = max(rn[k], v)
    hn, hl = ngrams(pre(h), 4)
    cd, cl = -1, -1
    for l in rl:
        d = abs(hl-l)
        if cd == -1 or d < cd: cd, cl = d, l
        elif d == cd and l < cl: cl = l
    corr = [0]*4; tot = [0]*4
    for k, v in hn.items():
        n = len(k)-1; tot[n] += v
        if k in rn: corr[n] += min(v, rn[k])
    return [hl, cl] + corr + tot
def compute_bleu(st, o):
    sl, rl = st[0], st[1]; correct = st[2:6]; total = st[6:10]
    sv = {'floor': 0.1, 'add-k': 1}.get(o['smooth'])
    bp = 1.0 if sl >= rl else (math.exp(1 - rl/sl) if sl > 0 else 0.0)
    prec = [0.0]*4
    if not any(correct): return 0.0
    sm = 1.; eff = 4
    correct = list(correct); total = list(total)
    for n in range(1, 5):
        if o['smooth'] == 'add-k' and n > 1: correct[n-1] += sv; total[n-1] += sv
        if total[n-1] == 0: break
        if o['eff']: eff = n
        if correct[n-1] == 0:
            if o['smooth'] == 'exp': sm *= 2; prec[n-1] = 100./(sm*total[n-1])
            elif o['smooth'] == 'floor': prec[n-1] = 100.*sv/total[n-1]
        else: prec[n-1] = 100.*correct[n-1]/total[n-1]
    return bp*math.exp(sum(my_log(p) for p in prec[:eff])/eff)
PUN = set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~')
def rmp(s):
    out = []
    for w in s.split():
        if len(w) == 1: out.append(w)
        elif w[-1] in PUN: out += [w[:-1], w[-1]]
        elif w[0] in PUN: out += [w[0], w[1:]]
        else: out.append(w)
    return out
def chr_ngrams(s, o):
    if o['lc']: s = s.lower()
    line = s if o['ws'] else ''.join(s.split())
    res = [Counter(line[i:i+n] for i in range(len(line)-n+1)) for n in range(1, 7)]
    if o['wo']:
        ws = rmp(s)
        for n in range(1, o['wo']+1): res.append(Counter(' '.join(ws[i:i+n]) for i in range(len(ws)-n+1)))
    return res
def chrf_f(st, o):
    eps = 1e-16; score = 0; eo = 0; f = 4.0; ap = ar = 0
    order = 6 + o['wo']
    for i in range(order):
        h, r, m = st[3*i:3*i+3]
        p = m/h if h > 0 else eps; rc = m/r if r > 0 else eps
        d = f*p + rc; score += ((1+f)*p*rc/d) if d > 0 else eps
        if h > 0 and r > 0: ap += p; ar += rc; eo += 1
    if o['eps']: return 100*score/order
    if eo == 0: ap = ar = 0
    else: ap /= eo; ar /= eo
    if ap + ar: return 100*(1+f)*ap*ar/(f*ap+ar)
    return 0.0
def chrf_stats(h, refs, o):
    hn = chr_ngrams(h, o); best = None; bf = -1
    for r in refs:
        rn = chr_ngrams(r, o); st = []
        for a, b in zip(hn, rn):
            hc = sum(a.values()); rc = sum(b.values()); m = sum(min(v, b[k]) for k, v in a.items() if k in b)
            st += [hc if rc > 0 else 0, rc, m]
        f = chrf_f(st, o)
        if f > bf: bf = f; best = st
    return best
random.seed(3)
vocab = ["The","the","dog","Dog","bit","man.","It","wasn't","surprising","Straße","ΟΔΟΣ","Σ","«quoted»","(x)","e.g.,","3.5","1,000","2019-05","&amp;","<skipped>","—","…","¿Qué?","日本語","、","x-ray","Ω≈","İstanbul","a.","b,",",c",".d","!","?!","'s","$5","50%","Ǆ","a\u00a0b","x\u3000y"]
def sent():
    return ' '.join(random.choice(vocab) for _ in range(random.randint(0, 14))) + random.choice(['', ' ', '.', ' \t'])
cases = []
for k in range(150):
    n = random.randint(1, 4); nref = random.randint(1, 3)
    hyps = [sent() for _ in range(n)]; refs = [[sent() if random.random() < 0.5 else h for h in hyps] for _ in range(nref)]
    bo = {'tok': random.choice(['13a','intl','none','char']), 'lc': random.random() < 0.3, 'smooth': random.choice(['exp','floor','add-k','none']), 'eff': random.random() < 0.5}
    co = {'lc': random.random() < 0.3, 'ws': random.random() < 0.2, 'eps': random.random() < 0.5, 'wo': random.choice([0, 2])}
    bst = [bleu_stats(h, [r[i] for r in refs], bo) for i, h in enumerate(hyps)]
    tot = [sum(x) for x in zip(*bst)]
    cst = [chrf_stats(h, [r[i] for r in refs], co) for i, h in enumerate(hyps)]
    ctot = [sum(x) for x in zip(*cst)]
    cases.append({'hyps': hyps, 'refs': refs, 'bleu_opts': bo, 'chrf_opts': co, 'bleu': compute_bleu(tot, bo), 'chrf': chrf_f(ctot, co)})
print(json.dumps({'description': 'BLEU and chrF of random corpora by a Python transcription of sacreBLEU 2.x (gen_differential_cases.py)', 'cases': cases}, ensure_ascii=False, indent=0))
