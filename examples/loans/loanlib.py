"""Loan arithmetic used by loans.py. Shipped to the executors with
--py-files, so its functions are pickled by reference and run from the
executor's copy of this file: breakpoints here bind by path."""


def monthly_payment(principal, annual_rate, years):
    """Annuity payment that pays the loan off in years*12 equal months."""
    n = years * 12
    r = annual_rate / 12.0
    if r == 0:
        return principal / n
    payment = principal * r / (1 - (1 + r) ** -n)  # BREAKPOINT: loanlib-payment
    return payment


def total_interest(principal, annual_rate, years):
    return monthly_payment(principal, annual_rate, years) * years * 12 - principal


def first_year_interest(principal, annual_rate, years):
    """Interest paid in the first 12 months, walking the amortization table."""
    balance = principal
    r = annual_rate / 12.0
    payment = monthly_payment(principal, annual_rate, years)
    paid = 0.0
    for _ in range(min(12, years * 12)):
        interest = balance * r  # BREAKPOINT: loanlib-amortize
        paid += interest
        balance -= payment - interest
    return paid


def risk_band(annual_rate):
    if annual_rate < 0.04:
        return "A"
    if annual_rate < 0.07:
        return "B"
    return "C"
