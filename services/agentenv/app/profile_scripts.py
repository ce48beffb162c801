"""The page scripts ``profiles/save`` and ``profiles/load`` run in a hidden
tab of one origin, served blank (:func:`agentenv.app.local_storage.on_origin`:
no site script runs there, and the tab is closed after).

Each is a function called with ``Runtime.callFunctionOn``: what a load
writes goes as its one string argument, which the log withholds (length
kept), never inside the code. A read answers a JSON string; its answer is
the computer's, never a log line's.

IndexedDB's requests are all made before any is awaited, inside one
transaction, so the transaction cannot commit between them.
"""

from __future__ import annotations

__all__ = ["CLEAR_ORIGIN", "HELD", "READ_ORIGIN", "WRITE_ORIGIN"]

#: ``function (limit)``: the origin's local storage and IndexedDB as a JSON
#: string of :class:`agentenv.protocol.profiles.OriginState`; or
#: ``{"too_large": bytes}`` once its part passes ``limit`` (JSON characters,
#: read no further), or ``{"unsupported": "db/store"}`` for a value JSON
#: cannot carry.
READ_ORIGIN = """async function (limit) {
  class Unsupported extends Error {}
  class TooLarge extends Error {}
  const check = (v, depth) => {
    if (v === null || typeof v === "string" || typeof v === "boolean") return;
    if (typeof v === "number") { if (!Number.isFinite(v)) throw new Unsupported(); return; }
    if (depth > 64) throw new Unsupported();
    if (Array.isArray(v)) { for (const x of v) check(x, depth + 1); return; }
    if (typeof v === "object") {
      const p = Object.getPrototypeOf(v);
      if (p !== Object.prototype && p !== null) throw new Unsupported();
      for (const k of Object.keys(v)) check(v[k], depth + 1);
      return;
    }
    throw new Unsupported();
  };
  const req = (r) => new Promise((ok, no) => {
    r.onsuccess = () => ok(r.result);
    r.onerror = () => no(r.error);
  });
  let size = 0;
  const grow = (v) => { size += JSON.stringify(v).length; if (size > limit) throw new TooLarge(); };
  const out = {local_storage: {}, indexeddb: []};
  let where = "";
  try {
    for (let i = 0; i < localStorage.length; i++) {
      const k = localStorage.key(i);
      out.local_storage[k] = localStorage.getItem(k);
    }
    grow(out.local_storage);
    for (const info of await indexedDB.databases()) {
      const db = await new Promise((ok, no) => {
        const r = indexedDB.open(info.name);
        r.onsuccess = () => ok(r.result);
        r.onerror = () => no(r.error);
        r.onblocked = () => no(new Error("the database is blocked"));
      });
      try {
        const saved = {name: db.name, version: db.version, stores: []};
        const names = Array.from(db.objectStoreNames);
        if (names.length) {
          const tx = db.transaction(names, "readonly");
          const asked = names.map((n) => {
            const st = tx.objectStore(n);
            return [st, req(st.getAllKeys()), req(st.getAll())];
          });
          for (const [st, keysAsked, valuesAsked] of asked) {
            const keys = await keysAsked;
            const values = await valuesAsked;
            where = db.name + "/" + st.name;
            const records = [];
            for (let j = 0; j < keys.length; j++) {
              check(keys[j], 0);
              check(values[j], 0);
              records.push({key: keys[j], value: values[j]});
            }
            grow(records);
            const indexes = Array.from(st.indexNames, (x) => {
              const ix = st.index(x);
              return {name: x, key_path: ix.keyPath, unique: ix.unique, multi_entry: ix.multiEntry};
            });
            saved.stores.push({
              name: st.name, key_path: st.keyPath, auto_increment: st.autoIncrement,
              indexes, records,
            });
          }
        }
        out.indexeddb.push(saved);
      } finally {
        db.close();
      }
    }
  } catch (e) {
    if (e instanceof TooLarge) return JSON.stringify({too_large: size});
    if (e instanceof Unsupported) return JSON.stringify({unsupported: where});
    throw e;
  }
  return JSON.stringify(out);
}"""

#: ``function (state)``: writes an OriginState (a JSON string) into the
#: origin; answers the records written. Stores are made as saved.
WRITE_ORIGIN = """async function (state) {
  state = JSON.parse(state);
  for (const [k, v] of Object.entries(state.local_storage || {})) localStorage.setItem(k, v);
  let written = 0;
  for (const d of state.indexeddb || []) {
    const db = await new Promise((ok, no) => {
      const r = indexedDB.open(d.name, d.version);
      r.onupgradeneeded = () => {
        const made = r.result;
        for (const s of d.stores) {
          if (made.objectStoreNames.contains(s.name)) continue;
          const os = made.createObjectStore(s.name, {
            keyPath: s.key_path === undefined ? null : s.key_path,
            autoIncrement: !!s.auto_increment,
          });
          for (const ix of s.indexes || []) {
            const how = {unique: !!ix.unique, multiEntry: !!ix.multi_entry};
            os.createIndex(ix.name, ix.key_path, how);
          }
        }
      };
      r.onsuccess = () => ok(r.result);
      r.onerror = () => no(r.error);
      r.onblocked = () => no(new Error("the database is blocked"));
    });
    try {
      const names = d.stores.map((s) => s.name);
      if (names.length) {
        await new Promise((ok, no) => {
          const tx = db.transaction(names, "readwrite");
          for (const s of d.stores) {
            const os = tx.objectStore(s.name);
            for (const rec of s.records || []) {
              if (s.key_path === null || s.key_path === undefined) os.put(rec.value, rec.key);
              else os.put(rec.value);
              written++;
            }
          }
          tx.oncomplete = () => ok();
          tx.onerror = () => no(tx.error);
          tx.onabort = () => no(tx.error || new Error("the write was aborted"));
        });
      }
    } finally {
      db.close();
    }
  }
  return written;
}"""

#: ``function ()``: what the origin holds, as a JSON string
#: ``{"local_storage": n, "indexeddb": [names]}`` (a load's check that the
#: scope is fresh).
HELD = """async function () {
  const names = (await indexedDB.databases()).map((d) => d.name);
  return JSON.stringify({local_storage: localStorage.length, indexeddb: names});
}"""

#: ``function ()``: empties the origin's local storage and IndexedDB (a
#: failed load's undoing, in a scope that was fresh).
CLEAR_ORIGIN = """async function () {
  localStorage.clear();
  for (const d of await indexedDB.databases()) {
    await new Promise((ok) => {
      const r = indexedDB.deleteDatabase(d.name);
      r.onsuccess = r.onerror = r.onblocked = () => ok();
    });
  }
  return true;
}"""
