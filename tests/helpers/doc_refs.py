#!/usr/bin/env python3
"""doc_refs.py ROOT - the documents' cross references resolve.

1. Every section number cited in the tree ("design.md §12.12", "§5.3",
   "clickhouse.md §9") is a heading of exactly one document: a citation
   names the document it follows within its paragraph (clickhouse.md,
   "design", an RFC or SPEC), or else the design documents, whose
   index is docs/design.md (contract, internals, state format, DNS).
2. docs/design.md's index lists each heading of those documents, under
   the document that holds it, and nothing else.
3. Every relative Markdown link names a file of the tree, and its
   #anchor (GitHub's slug of a heading) a heading of that file.

Prints one line per broken reference and exits 1 if there is any.
"""
import os
import re
import sys
import unicodedata

root = sys.argv[1]
docs = os.path.join(root, 'docs')
INDEX = 'design.md'
HEAD = re.compile(r'^(#{1,6}) (.*?)\s*$', re.M)
SEC = re.compile(r'^(§\d+(?:\.\d+)*) ')
bad = []


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def headings(text):
    # Headings outside fenced code blocks.
    out, fence = [], False
    for line in text.split('\n'):
        if line.startswith('```'):
            fence = not fence
        elif not fence:
            m = HEAD.match(line)
            if m:
                out.append((len(m.group(1)), m.group(2)))
    return out


def slug(title):
    # GitHub's anchor: lower case, punctuation dropped, spaces to '-'.
    s = title.strip().lower()
    s = ''.join(c for c in s
                if c in ' -_' or unicodedata.category(c)[0] in 'LN')
    return s.replace(' ', '-')


design_docs = sorted(f for f in os.listdir(docs)
                     if f.endswith('.md') and f not in (INDEX, 'clickhouse.md'))
owner = {}
order = []
for f in design_docs:
    for lvl, title in headings(read(os.path.join(docs, f))):
        m = SEC.match(title + ' ')
        if not m or lvl not in (2, 3):
            continue
        sec = m.group(1)
        if sec in owner:
            bad.append('docs/%s: %s is also a heading of %s' %
                       (f, sec, owner[sec][0]))
        owner[sec] = (f, title)
        order.append(sec)
ch = {SEC.match(t + ' ').group(1) for l, t in headings(read(os.path.join(docs, 'clickhouse.md')))
      if SEC.match(t + ' ')}

# 2. The index.
listed = {}
doc = None
for line in read(os.path.join(docs, INDEX)).split('\n'):
    m = re.match(r'- \*\*(§\d+) (.*)\*\* — \[([^\]]+)\]', line)
    if m:
        doc = m.group(3)
        listed[m.group(1)] = (doc, m.group(1) + ' ' + m.group(2))
        continue
    m = re.match(r'  - (§\d+(?:\.\d+)+) (.*)', line)
    if m:
        listed[m.group(1)] = (doc, m.group(1) + ' ' + m.group(2))
for sec in order:
    if sec not in listed:
        bad.append('docs/%s: %s is not in the index' % (INDEX, sec))
    elif listed[sec] != owner[sec]:
        bad.append('docs/%s: %s is listed as %s, but is %s' %
                   (INDEX, sec, listed[sec], owner[sec]))
for sec in listed:
    if sec not in owner:
        bad.append('docs/%s: %s is listed but is no heading' % (INDEX, sec))

# 1. Citations.
CITE = re.compile(r'([A-Za-z0-9_-]+\.md)|\b(SPEC|RFC ?\d+|design)\b'
                  r'|(§\d+(?:\.\d+)*)|(\n[ \t*#/;-]*\n)')
EXTS = ('.c', '.h', '.sh', '.py', '.md', '.am', '.ac', '.supp', '.conf',
        '.service', '.timer', '.map', '.in')
SKIP = {'.git', 'build', 'autom4te.cache', '.deps', '.libs'}
n = 0
for dp, dns, fns in os.walk(root):
    dns[:] = [d for d in dns if d not in SKIP and not d.startswith('ci.')]
    for fn in fns:
        path = os.path.join(dp, fn)
        rel = os.path.relpath(path, root)
        if not fn.endswith(EXTS) and not rel.startswith(('scripts/', 'etc/')):
            continue
        if fn.endswith('.in') and os.path.exists(path[:-3] + '.am'):
            continue  # automake's output
        if fn == 'configure' or fn.startswith('config.'):
            continue
        try:
            text = read(path)
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        own = fn if rel.startswith('docs' + os.sep) else None
        near, at = None, -1
        for m in CITE.finditer(text):
            if m.group(1) or m.group(2):
                near = m.group(1) or m.group(2)
                near = 'design.md' if near == 'design' else near
                at = m.end()
                continue
            if m.group(4):
                near, at = None, -1
                continue
            bol = text.rfind('\n', 0, m.start()) + 1
            if re.match(r'#{2,4} $', text[bol:m.start()]):
                continue  # a heading, not a citation
            target = near if at >= 0 and m.start() - at < 200 else None
            target = target or own or INDEX
            if target == 'clickhouse.md':
                known = ch
            elif target == INDEX or target in design_docs:
                known = owner
            else:
                continue  # an RFC's section, or SPEC.md's
            n += 1
            if m.group(3) not in known:
                line = text.count('\n', 0, m.start()) + 1
                bad.append('%s:%d: %s cites no heading of %s' %
                           (rel, line, m.group(3), 'clickhouse.md'
                            if known is ch else 'the design documents'))

# 3. Links.
LINK = re.compile(r'\]\(([^)\s]+)\)')
for dp, dns, fns in os.walk(root):
    dns[:] = [d for d in dns if d not in SKIP and not d.startswith('ci.')]
    for fn in fns:
        if not fn.endswith('.md'):
            continue
        path = os.path.join(dp, fn)
        text = read(path)
        for m in LINK.finditer(text):
            url = m.group(1)
            if re.match(r'[a-z]+:', url):
                continue
            file, _, anchor = url.partition('#')
            dest = os.path.normpath(os.path.join(dp, file)) if file else path
            rel = os.path.relpath(path, root)
            line = text.count('\n', 0, m.start()) + 1
            if not os.path.exists(dest):
                bad.append('%s:%d: link to %s: no such file' % (rel, line, url))
            elif anchor and dest.endswith('.md'):
                if anchor not in {slug(t) for l, t in headings(read(dest))}:
                    bad.append('%s:%d: link to %s: no such heading' %
                               (rel, line, url))

for b in bad:
    print(b)
print('%d citations of %d sections checked' % (n, len(owner)))
sys.exit(1 if bad else 0)
