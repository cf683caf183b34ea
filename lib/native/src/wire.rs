//! A saved plan's state in protobuf's wire format (`SavedPlan.state`, field 3: packed zigzag
//! varints), written and read here: a plan run whole may hold half a million integers, which
//! as Python ints cost more than the quantum's work to save and load.

/// `SavedPlan.state`'s field number.
const STATE: u64 = 3;

/// `values` as field 3 of a SavedPlan (packed `sint64`): appended to the rest of the message,
/// it is the message with its state.
pub fn state_field(values: &[i64]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(values.len() * 3);
    for &v in values {
        put_varint(&mut payload, ((v << 1) ^ (v >> 63)) as u64);
    }
    let mut out = Vec::with_capacity(payload.len() + 11);
    put_varint(&mut out, STATE << 3 | 2);
    put_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(&payload);
    out
}

/// The state of a SavedPlan message (every field 3 in it, packed or not, in order; the other
/// fields skipped).
pub fn state_of(message: &[u8]) -> Result<Vec<i64>, String> {
    let mut values = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let key = varint(message, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 if field == STATE => values.push(zigzag(varint(message, &mut at)?)),
            0 => {
                varint(message, &mut at)?;
            }
            1 => at = skip(message, at, 8)?,
            2 => {
                let len = usize::try_from(varint(message, &mut at)?).map_err(|e| e.to_string())?;
                let end = skip(message, at, len)?;
                if field == STATE {
                    let mut inner = at;
                    while inner < end {
                        values.push(zigzag(varint(&message[..end], &mut inner)?));
                    }
                }
                at = end;
            }
            5 => at = skip(message, at, 4)?,
            _ => return Err(format!("saved plan: wire type {wire}")),
        }
    }
    Ok(values)
}

fn zigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or("saved plan: truncated")?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err("saved plan: a varint too long".into())
}

fn skip(bytes: &[u8], at: usize, len: usize) -> Result<usize, String> {
    at.checked_add(len)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| "saved plan: truncated".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reads_back_from_a_message_around_it() {
        let values = [0, 1, -1, 63, -64, i64::MAX, i64::MIN, 300];
        let mut message = vec![0x0a, 2, 0x08, 1]; // field 1, a message of 2 bytes
        message.extend(state_field(&values));
        message.extend([0x28, 6]); // field 5 = 6
        assert_eq!(state_of(&message).unwrap(), values);
        assert!(state_of(&message[..message.len() - 3]).is_err());
    }
}
