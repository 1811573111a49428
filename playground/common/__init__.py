"""What every tab shares: text and number formatting, escaping, colours, the base figure layout."""
