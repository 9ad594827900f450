"""Generate the committed warranty.pdf: `python -m demo.helpcenter.warranty_pdf`."""

from __future__ import annotations

from pathlib import Path

from demo.pdf import pdf_bytes

BLOCKS = [
    ("h1", "Acme Outdoor Gear Limited Warranty"),
    (
        "p",
        "We build our gear to last and stand behind it. This warranty explains what we cover, "
        "for how long, and how to file a claim. It is in addition to your rights under law.",
    ),
    ("h2", "What the warranty covers"),
    (
        "p",
        "Acme-brand products are covered for 2 years from the purchase date against defects in "
        "materials and workmanship, such as failed seams, delaminating fabric, broken buckles "
        "or a zipper that separates under normal use. Headlamps, the ST-300 stove igniter and "
        "other electronic parts are covered for 1 year. Products from other brands that we sell "
        "are covered by their manufacturer's warranty, and our team will help you file with "
        "the manufacturer.",
    ),
    ("h2", "What the warranty does not cover"),
    (
        "p",
        "The warranty does not cover normal wear and tear, damage from accidents, misuse or "
        "improper care, damage from fire or sun exposure over time, products that were altered "
        "or repaired by someone other than Acme, products bought from unauthorized resellers, "
        "and rental gear. Cosmetic changes that do not affect how a product works, such as "
        "faded colors or scuffed leather, are not defects.",
    ),
    ("h2", "How to file a warranty claim"),
    (
        "p",
        "File a claim at acme.example/warranty or ask our chat assistant. Have your order number "
        "(for example A-1042) or another proof of purchase, clear photos of the defect, and a "
        "short description of what happened ready. You get a claim reference that starts with "
        "W-, for example W-20931. We review every claim within 5 business days and email you "
        "the decision.",
    ),
    ("h2", "What happens when a claim is approved"),
    (
        "p",
        "For an approved claim we repair the product, replace it with the same or an equivalent "
        "item, or, if neither is possible, give you store credit for the price you paid. We "
        "email a prepaid label, so sending the product to us is free, and we ship the repaired "
        "or replacement item back free of charge. Repairs take 2-3 weeks from the day the "
        "product reaches our repair shop. A replacement product keeps the warranty period of "
        "the original purchase.",
    ),
    ("h2", "Repairs outside the warranty"),
    (
        "p",
        "The Acme Repair Shop also fixes gear that is out of warranty or damaged by wear, for a "
        "fee: zipper replacement from $15 to $35, seam re-taping for $25, and tent pole "
        "sections for $12 each, including the Trailhead 2 tent (model TR-2210). Send photos "
        "through the warranty form and choose paid repair; we email a quote within 3 business "
        "days and start only after you accept it.",
    ),
]


def main() -> None:
    target = Path(__file__).with_name("warranty.pdf")
    target.write_bytes(pdf_bytes(BLOCKS))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
