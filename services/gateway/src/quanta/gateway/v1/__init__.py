"""The preemptive API, `/v1`: one quantum per request (`queries`), the `next` tokens that carry a
saved plan between requests (`tokens`), the catalog (`datasets`), and their models (`models`)."""
