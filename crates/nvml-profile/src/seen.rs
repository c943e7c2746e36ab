//! A map for validation's "seen before?" checks: a few dozen keys at most (devices, profile
//! rows, switches), so a linear scan is as fast as hashing and links far less code into the mock
//! library than a `HashMap` instance per key type.

/// Keys in insertion order with `HashMap`'s `insert`/`get`/`remove` answers.
#[derive(Debug)]
pub(crate) struct Seen<K, V> {
    entries: Vec<(K, V)>,
}

impl<K: PartialEq, V> Seen<K, V> {
    /// An empty map.
    pub(crate) fn new() -> Self {
        Seen {
            entries: Vec::new(),
        }
    }

    /// Sets `key` to `value`; the value it had before, if any.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.entries.iter_mut().find(|(seen, _)| *seen == key) {
            Some((_, old)) => Some(std::mem::replace(old, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.entries
            .iter()
            .find(|(seen, _)| seen == key)
            .map(|(_, value)| value)
    }

    /// Takes `key` out; its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let position = self.entries.iter().position(|(seen, _)| seen == key)?;
        Some(self.entries.swap_remove(position).1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::Seen;

    #[test]
    fn insert_get_and_remove_answer_like_a_hash_map() {
        let mut seen = Seen::new();
        assert_eq!(seen.insert("a", 1), None);
        assert_eq!(seen.insert("b", 2), None);
        assert_eq!(seen.insert("a", 3), Some(1));
        assert_eq!(
            (seen.get(&"a"), seen.get(&"b"), seen.get(&"c")),
            (Some(&3), Some(&2), None)
        );
        assert_eq!(seen.remove(&"a"), Some(3));
        assert_eq!((seen.remove(&"a"), seen.get(&"b")), (None, Some(&2)));
    }
}
