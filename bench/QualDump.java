// Prints a BSBM qualification file (Java serialization of the driver's QueryResult objects) as text
// lines: R run query sorted timed-out, Q the query, H each head variable, V each row (an unsorted
// result's rows once per occurrence); backslash, tab and newline escaped. A single-file source
// program (`java QualDump.java FILE.qual OUT.txt`), run by bench/bsbm.py and tests/bsbm.
import java.io.*;
import java.lang.reflect.Field;
import java.util.*;

public class QualDump {
    static String esc(Object o) {
        return String.valueOf(o).replace("\\", "\\\\").replace("\t", "\\t")
            .replace("\n", "\\n").replace("\r", "\\r");
    }

    static Object get(Object o, String name) throws Exception {
        Field f = o.getClass().getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }

    public static void main(String[] args) throws Exception {
        try (ObjectInputStream in = new ObjectInputStream(new BufferedInputStream(new FileInputStream(args[0])));
             PrintStream out = new PrintStream(
                 new BufferedOutputStream(new FileOutputStream(args[1])), false, "UTF-8")) {
            in.readInt(); in.readLong(); in.readInt(); in.readInt(); in.readObject(); in.readObject();
            while (true) {
                Object r;
                try { r = in.readObject(); } catch (EOFException end) { break; }
                out.println("R\t" + get(r, "run") + "\t" + get(r, "queryNr") + "\t" + get(r, "sorted") + "\t"
                    + get(r, "hasTimedOut"));
                out.println("Q\t" + esc(get(r, "queryText")));
                Object head = get(r, "headList");
                if (head != null) for (Object h : (List<?>) head) out.println("H\t" + esc(h));
                Object list = get(r, "resultList");
                Object hash = get(r, "resultHash");
                if (list != null) for (Object v : (List<?>) list) out.println("V\t" + esc(v));
                if (hash != null) for (Map.Entry<?, ?> e : ((Map<?, ?>) hash).entrySet())
                    for (int i = 0; i < (Integer) e.getValue(); i++) out.println("V\t" + esc(e.getKey()));
            }
        }
    }
}
