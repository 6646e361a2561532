import java.sql.*;
import java.util.*;

/**
 * Runs one script of steps through JDBC against the URL given (the DBeaver
 * libSQL driver against sluice, or the SQLite JDBC driver against a local
 * file) and prints one JSON line per step: {"step": name, "ok": ...} or
 * {"step": name, "error": message}.
 */
public class Run {
    interface Step { Object run(Connection c) throws Exception; }

    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof List<?> l) {
            StringJoiner j = new StringJoiner(",", "[", "]");
            for (Object o : l) j.add(json(o));
            return j.toString();
        }
        String s = v.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> { if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch)); else b.append(ch); }
            }
        }
        return b.append('"').toString();
    }

    static void step(Connection c, String name, Step s) {
        String out;
        try {
            out = "\"ok\":" + json(s.run(c));
        } catch (Exception e) {
            out = "\"error\":" + json(e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName());
        }
        System.out.println("{\"step\":" + json(name) + "," + out + "}");
    }

    static List<Object> rows(ResultSet rs) throws SQLException {
        List<Object> out = new ArrayList<>();
        ResultSetMetaData md = rs.getMetaData();
        List<Object> names = new ArrayList<>();
        for (int i = 1; i <= md.getColumnCount(); i++) names.add(md.getColumnLabel(i));
        out.add(names);
        while (rs.next()) {
            List<Object> row = new ArrayList<>();
            // getObject first: the DBeaver driver's getString gives "" for NULL.
            for (int i = 1; i <= md.getColumnCount(); i++) row.add(rs.getObject(i) == null ? null : rs.getString(i));
            out.add(row);
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String token = args.length > 1 ? args[1] : null; // the DBeaver driver takes the token as the password
        // What DBeaver's SQL editor does with a script: one statement at a time.
        // The update count of writes; DDL only succeeds or fails (drivers
        // differ on a count SQLite does not define for it).
        String[] script = {
            "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, qty INTEGER, price REAL, note TEXT)",
            "DELETE FROM items",
            "INSERT INTO items (name, qty, price) VALUES ('apple', 3, 0.5), ('pear', 0, 1.25)",
            "UPDATE items SET qty = qty + 1",
            "CREATE INDEX IF NOT EXISTS items_qty ON items(qty)",
            "UPDATE items SET note = 'none' WHERE qty > 100",
        };
        Connection opened;
        try {
            opened = DriverManager.getConnection(url, null, token); // the DBeaver driver queries the server here
        } catch (SQLException e) {
            System.out.println("{\"step\":\"connect\",\"error\":" + json(e.getMessage()) + "}");
            return;
        }
        try (Connection c = opened) {
            for (int i = 0; i < script.length; i++) {
                final String q = script[i];
                step(c, "script " + i, conn -> {
                    try (Statement st = conn.createStatement()) {
                        st.execute(q);
                        return q.startsWith("CREATE") ? "done" : st.getUpdateCount();
                    }
                });
            }
            step(c, "prepared insert", conn -> {
                try (PreparedStatement ps = conn.prepareStatement("INSERT INTO items (name, qty, price, note) VALUES (?, ?, ?, ?)")) {
                    ps.setString(1, "plum \"quoted\" ü");
                    ps.setInt(2, 7);
                    ps.setDouble(3, 2.75);
                    ps.setNull(4, Types.VARCHAR);
                    ps.execute(); // the DBeaver driver has no PreparedStatement.executeUpdate()
                    return ps.getUpdateCount();
                }
            });
            step(c, "select", conn -> {
                try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT id, name, qty, price, note, qty * price AS total FROM items ORDER BY id")) {
                    return rows(rs);
                }
            });
            step(c, "prepared select", conn -> {
                try (PreparedStatement ps = conn.prepareStatement("SELECT name FROM items WHERE qty > ? ORDER BY name")) {
                    ps.setInt(1, 2);
                    try (ResultSet rs = ps.executeQuery()) { return rows(rs); }
                }
            });
            step(c, "aggregate", conn -> {
                try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*), sum(qty), typeof(sum(price)) FROM items")) {
                    return rows(rs);
                }
            });
            step(c, "unique violation", conn -> {
                try (Statement st = conn.createStatement()) { st.execute("INSERT INTO items (name) VALUES ('apple')"); return st.getUpdateCount(); }
            });
            step(c, "not null violation", conn -> {
                try (Statement st = conn.createStatement()) { st.execute("INSERT INTO items (qty) VALUES (1)"); return st.getUpdateCount(); }
            });
            step(c, "syntax error", conn -> {
                try (Statement st = conn.createStatement()) { st.execute("SELEC 1"); return "done"; }
            });
            step(c, "after errors", conn -> {
                try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM items")) { return rows(rs); }
            });
            step(c, "tables", conn -> {
                List<Object> names = new ArrayList<>();
                try (ResultSet rs = conn.getMetaData().getTables(null, null, "%", new String[]{"TABLE"})) {
                    while (rs.next()) names.add(rs.getString("TABLE_NAME"));
                }
                Collections.sort(names, Comparator.comparing(Object::toString));
                return names;
            });
        }
    }
}
